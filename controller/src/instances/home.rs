//! A course container's home volume seen from its instance: the snapshots its daemon made of
//! it (`GET /instances/{name}/home/snapshots`, a read passed through to the agent) and a
//! restore from one (`POST /instances/{name}/home/restore`, an operation: it stops and starts
//! the container, so it is durable and retried as any node change). For the student, their
//! course's staff and admins, as the instance's other routes are; anyone else gets a 403.

use cohort_proto::agent::HomeSnapshot;
use cohort_proto::api::instances::RestoreHomeRequest;
use cohort_proto::api::operations::Operation as WireOperation;
use diesel::Connection;
use serde_json::json;

use crate::db::enums::{AuditAction, AuditObject};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};

use super::manage::find;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::{ActionError, ActionResult};
use crate::placement::home_size::home_volume;
use crate::{validate, views};

/// The home's snapshots, oldest first. 404 for an instance with no home volume (not a course's).
pub async fn snapshots(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<HomeSnapshot>> {
    let looked_up = name.clone();
    let node_id = ctl
        .db(move |conn| {
            let instance = find(conn, &caller, &looked_up)?;
            if instance.course_id.is_none() {
                return Err(ActionError::NotFound(format!(
                    "instance {looked_up} has no home volume (it is not a course's)"
                )));
            }
            instance.node_id.ok_or_else(|| {
                ActionError::conflict(
                    None,
                    format!("instance {looked_up} is queued, not on a node yet"),
                )
            })
        })
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    agent
        .home_snapshots(home_volume(&name))
        .await
        .map_err(ActionError::on_node(node.name))
}

/// Restores the home of instance `name` from `req.snapshot`, whole, as an operation with one
/// `restore_home` item (audited `restore_home`). 400 at `snapshot` for a name that cannot be one.
pub async fn restore(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: RestoreHomeRequest,
) -> ActionResult<WireOperation> {
    validate::instance_name("snapshot", &req.snapshot)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            if instance.course_id.is_none() {
                return Err(ActionError::NotFound(format!(
                    "instance {name} has no home volume (it is not a course's)"
                )));
            }
            let op = enqueue(
                conn,
                &payload::Job::RestoreHome(payload::RestoreHome {
                    snapshot: req.snapshot.clone(),
                }),
                Some(caller.user.id),
                &name,
                &[Step::new(StepKind::RestoreHome, &name, Some(instance.id))],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::RestoreHome,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({ "snapshot": req.snapshot }),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}
