//! `POST /api/v1/instances/{name}/move` (admin): one instance, its root disk and its home, to a
//! named node (`cohort move NAME --target NODE`). Everything a request can get wrong is refused
//! here, before anything is recorded: an unknown node, the node it is on, a node that takes no
//! instances (offline, cordoned, evacuating) or has no room for it. The move itself is the
//! `move` step of a durable operation (see [`crate::jobs::moves`]).

use cohort_proto::api::instances::{DesiredState, MoveInstance};
use cohort_proto::api::nodes::NodeState;
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::placement::move_room;
use crate::views;

pub async fn move_instance(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: MoveInstance,
) -> ActionResult<WireOperation> {
    caller.require(Role::Admin)?;
    let placement = ctl.config.placement.clone();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = Instance::by_name(conn, &name)?
                .ok_or_else(|| ActionError::NotFound(format!("instance {name}")))?;
            if instance.desired_state == DesiredState::Deleted {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is being deleted"),
                ));
            }
            let target = Node::by_name(conn, &req.target)?.ok_or_else(|| ActionError::Missing {
                field: "target".into(),
                what: format!("node {}", req.target),
            })?;
            if target.state != NodeState::Online {
                return Err(ActionError::conflict(
                    Some("target"),
                    format!(
                        "node {} is {}: only an online node takes instances",
                        target.name, target.state
                    ),
                ));
            }
            let Some(node_id) = instance.node_id else {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is on no node yet (it waits to be placed)"),
                ));
            };
            if target.id == node_id {
                return Err(ActionError::invalid(
                    "target",
                    format!("instance {name} is on node {} already", target.name),
                ));
            }
            if let Some(why) = move_room::shortage(conn, &instance, &target, &placement)? {
                return Err(ActionError::conflict(Some("target"), why));
            }
            let source = Node::find(conn, node_id)?;
            let op = enqueue(
                conn,
                &payload::Job::MoveInstance(payload::MoveTo {
                    target: target.name.clone(),
                }),
                Some(caller.user.id),
                &name,
                &[Step::new(StepKind::Move, &name, Some(instance.id)).on(&source.name)],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Move,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({"from": source.name, "to": target.name}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}
