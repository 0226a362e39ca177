//! GPUs: the fleet's GPUs with their use, and the admin's share limit.

use cohort_proto::api::gpus::{Gpu as WireGpu, UpdateGpu};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::gpu::Gpu;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::node::Node;
use crate::error::{ActionError, ActionResult};
use crate::views;

pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireGpu>> {
    ctl.db_as(bearer, |conn, caller| {
        caller.require(Role::Instructor)?;
        let nodes = Node::list(conn)?;
        Ok(Gpu::list_with_use(conn)?
            .iter()
            .map(|(g, used)| {
                let node = nodes
                    .iter()
                    .find(|n| n.id == g.node_id)
                    .map_or("", |n| n.name.as_str());
                views::gpu(g, node, *used)
            })
            .collect())
    })
    .await
}

/// The GPU models present in the fleet, for a create form's choice (any signed-in user: a model
/// name is no secret, and a student picks from it).
pub async fn models(ctl: &Controller) -> ActionResult<Vec<String>> {
    ctl.db(|conn| Ok(Gpu::present_models(conn)?)).await
}

/// Sets the share limit. Lowering it under a slot in use is refused: the allocation's foreign
/// key cascades the new limit and its CHECK fails, so the database itself refuses.
pub async fn update(
    ctl: &Controller,
    caller: Caller,
    uuid: String,
    req: UpdateGpu,
) -> ActionResult<WireGpu> {
    caller.require(Role::Admin)?;
    if req.share_limit == 0 || req.share_limit > 64 {
        return Err(ActionError::invalid("share_limit", "must be 1 to 64"));
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let gpu = Gpu::by_uuid(conn, &uuid)?
                .ok_or_else(|| ActionError::NotFound(format!("gpu {uuid}")))?;
            if gpu.mig_parent.is_some() && req.share_limit != 1 {
                return Err(ActionError::invalid(
                    "share_limit",
                    "a MIG instance is exclusive (1)",
                ));
            }
            let updated = Gpu::set_share_limit(conn, gpu.id, req.share_limit as i32).map_err(
                |e| match e {
                    diesel::result::Error::DatabaseError(
                        diesel::result::DatabaseErrorKind::CheckViolation,
                        _,
                    ) => ActionError::conflict(
                        Some("share_limit"),
                        "slots above the new limit are in use",
                    ),
                    other => other.into(),
                },
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Update,
                AuditObject::Gpu,
                &uuid,
                json!({"share_limit": req.share_limit}),
            )?;
            let used = GpuAllocation::slots(conn, gpu.id)?.len() as i64;
            let node = Node::find(conn, gpu.node_id)?;
            Ok(views::gpu(&updated, &node.name, used))
        })
    })
    .await
}
