//! Nodes: listing, cordon, evacuate, restore and removal (which revokes the certificate).

use cohort_proto::api::instances::DesiredState;
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy, Node as WireNode, NodeState};
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::node_certificate::NodeCertificate;
use crate::db::models::operation_item::OperationItem;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::views;

fn find(conn: &mut PgConnection, name: &str) -> ActionResult<Node> {
    Node::by_name(conn, name)?.ok_or_else(|| ActionError::NotFound(format!("node {name}")))
}

pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireNode>> {
    ctl.db_as(bearer, |conn, caller| {
        caller.require(Role::Instructor)?;
        let rows = Node::list(conn)?;
        Ok(views::nodes(conn, &rows)?)
    })
    .await
}

pub async fn get(ctl: &Controller, bearer: Bearer, name: String) -> ActionResult<WireNode> {
    ctl.db_as(bearer, move |conn, caller| {
        caller.require(Role::Instructor)?;
        let node = find(conn, &name)?;
        Ok(views::nodes(conn, &[node])?.remove(0))
    })
    .await
}

/// Takes the node out of placement; its instances keep running.
pub async fn cordon(ctl: &Controller, caller: Caller, name: String) -> ActionResult<WireNode> {
    caller.require(Role::Admin)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let node = find(conn, &name)?;
            Node::set_state(conn, node.id, NodeState::Cordoned)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Cordon,
                AuditObject::Node,
                &name,
                json!({}),
            )?;
            let node = Node::find(conn, node.id)?;
            Ok(views::nodes(conn, &[node])?.remove(0))
        })
    })
    .await
}

/// Stops its instances, or moves them with their root disks and homes to other nodes (see
/// [`crate::jobs::moves`]), and keeps it out of placement.
pub async fn evacuate(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: EvacuateNode,
) -> ActionResult<WireOperation> {
    caller.require(Role::Admin)?;
    let action = match req.policy {
        EvacuatePolicy::Stop => StepKind::EvacuateStop,
        EvacuatePolicy::Move => StepKind::EvacuateMove,
    };
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let node = find(conn, &name)?;
            Node::set_state(conn, node.id, NodeState::Evacuating)?;
            let instances = Instance::on_node(conn, node.id)?;
            let steps: Vec<Step<'_>> = instances
                .iter()
                .map(|i| Step::new(action, &i.name, Some(i.id)).on(&name))
                .collect();
            let op = enqueue(
                conn,
                &payload::Job::EvacuateNode(payload::Evacuate { policy: action }),
                Some(caller.user.id),
                &name,
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Evacuate,
                    object_kind: AuditObject::Node,
                    object: &name,
                    detail: json!({"policy": action.as_str()}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Puts the node back into placement, starts what evacuation stopped, and moves back (root
/// disk and home) what its last evacuation moved away and is still elsewhere.
pub async fn restore(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<WireOperation> {
    caller.require(Role::Admin)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let node = find(conn, &name)?;
            Node::set_state(conn, node.id, NodeState::Online)?;
            let here = Instance::on_node(conn, node.id)?;
            let mut away = Vec::new();
            for id in OperationItem::moved_by_last_evacuation(conn, &name)? {
                let Some(instance) = Instance::find(conn, id).optional()? else {
                    continue;
                };
                match instance.node_id {
                    Some(at)
                        if at != node.id && instance.desired_state != DesiredState::Deleted =>
                    {
                        let at = Node::find(conn, at)?.name;
                        away.push((instance, at));
                    }
                    _ => {}
                }
            }
            let starts = here
                .iter()
                .filter(|i| i.desired_state == DesiredState::Running);
            let mut steps: Vec<Step<'_>> = starts
                .map(|i| Step::new(StepKind::Start, &i.name, Some(i.id)).on(&name))
                .collect();
            for (instance, at) in &away {
                steps.push(Step::new(StepKind::Move, &instance.name, Some(instance.id)).on(at));
            }
            let op = enqueue(
                conn,
                &payload::Job::RestoreNode(payload::MoveTo {
                    target: name.clone(),
                }),
                Some(caller.user.id),
                &name,
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Restore,
                    object_kind: AuditObject::Node,
                    object: &name,
                    detail: json!({}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Revokes the node's certificate and forgets it; refused while instances are placed on it.
pub async fn remove(ctl: &Controller, caller: Caller, name: String) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let node = find(conn, &name)?;
            let held = Instance::on_node(conn, node.id)?.len();
            if held > 0 {
                return Err(ActionError::conflict(
                    None,
                    format!("node {name} still holds {held} instances: evacuate it with policy move, or delete them"),
                ));
            }
            let revoked = NodeCertificate::revoke_all(conn, &name)?;
            Node::delete(conn, node.id)?;
            audit::record(conn, caller.name(), AuditAction::Remove, AuditObject::Node, &name, json!({"revoked_certificates": revoked}))?;
            Ok(())
        })
    })
    .await
}
