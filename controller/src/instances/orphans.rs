//! Orphans (admin): containers in a node's LXD project that Cohort has no record of, listed as
//! the poller recorded them, adopted as an instance of an owner, or deleted from their node.

use cohort_proto::api::instances::{DesiredState, ObservedState};
use cohort_proto::api::operations::OperationStatus;
use cohort_proto::api::orphans::{AdoptOrphan, Orphan as WireOrphan};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::image::Image;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::orphan::Orphan;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::jobs::enqueue::{enqueue, Audit};
use crate::jobs::payload::{Job, OrphanOnNode};
use crate::jobs::settle::{settle, SETTLE};
use crate::jobs::{Step, StepKind};

fn view(o: Orphan, node: String) -> WireOrphan {
    WireOrphan {
        node,
        name: o.name,
        status: o.status.to_string(),
        ssh_port: o.ssh_port.and_then(|p| u16::try_from(p).ok()),
        first_seen_at: o.first_seen_at,
        last_seen_at: o.last_seen_at,
    }
}

/// The orphan `name` on node `node`, its row locked, or a 404.
fn find(conn: &mut PgConnection, node: &str, name: &str) -> ActionResult<(Node, Orphan)> {
    let missing = || ActionError::NotFound(format!("orphan {name} on node {node}"));
    let node = Node::by_name(conn, node)?.ok_or_else(missing)?;
    let orphan = Orphan::lock(conn, node.id, name)?.ok_or_else(missing)?;
    Ok((node, orphan))
}

/// `GET /api/v1/orphans`.
pub async fn list(ctl: &Controller, caller: Caller) -> ActionResult<Vec<WireOrphan>> {
    caller.require(Role::Admin)?;
    ctl.db(|conn| {
        let names: std::collections::HashMap<i64, String> =
            Node::names(conn)?.into_iter().collect();
        Ok(Orphan::list(conn)?
            .into_iter()
            .map(|o| {
                let node = names.get(&o.node_id).cloned().unwrap_or_default();
                view(o, node)
            })
            .collect())
    })
    .await
}

/// `DELETE /api/v1/orphans/{node}/{name}`: a `delete_orphan` operation takes the container from
/// its node, then the record (and with it the port's reservation). The request waits for it a
/// while ([`crate::jobs::settle`]): its failure is the answer (502, the agent's reason); one
/// still waiting for its node is a 504 naming the operation, which goes on in the worker.
pub async fn delete(
    ctl: &Controller,
    caller: Caller,
    node: String,
    name: String,
) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    let actor = caller.name().to_string();
    let user_id = caller.user.id;
    let (n, s) = (node.clone(), name.clone());
    let op_id = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let (_, orphan) = find(conn, &n, &s)?;
                let job = Job::DeleteOrphan(OrphanOnNode {
                    node: n.clone(),
                    name: s.clone(),
                });
                let step = Step::new(StepKind::DeleteOrphan, &s, None).on(&n);
                let audit = Audit {
                    actor: &actor,
                    action: AuditAction::DeleteOrphan,
                    object_kind: AuditObject::Instance,
                    object: &s,
                    detail: json!({"node": n, "ssh_port": orphan.ssh_port}),
                };
                Ok(enqueue(conn, &job, Some(user_id), &s, &[step], Some(audit))?.id)
            })
        })
        .await?;
    let op = settle(ctl, op_id, SETTLE).await?;
    // A step still trying says why in its item (the node unreachable, say), the operation only
    // once it ends.
    let why = match op.error.clone() {
        Some(why) => why,
        None => ctl
            .db(move |conn| Ok(OperationItem::for_operation(conn, op_id)?))
            .await?
            .into_iter()
            .find_map(|item| item.error)
            .unwrap_or_else(|| "no attempt has ended yet".into()),
    };
    match op.status {
        OperationStatus::Success => Ok(()),
        OperationStatus::Failure | OperationStatus::Cancelled => Err(ActionError::Agent {
            node,
            source: AgentError::Decode(format!("deleting {name} failed: {why}")),
        }),
        _ => Err(ActionError::Agent {
            node,
            source: AgentError::Status {
                status: 504,
                code: "pending".into(),
                message: format!(
                    "{name} is not deleted yet ({why}); operation {op_id} goes on until the node \
                     answers"
                ),
                field: None,
            },
        }),
    }
}

/// `POST /api/v1/orphans/{node}/{name}/adopt`: the container becomes an instance of `owner`
/// on its node, with its port and the limits LXD holds for it; the poller then follows it like
/// any other.
pub async fn adopt(
    ctl: &Controller,
    caller: Caller,
    node: String,
    name: String,
    req: AdoptOrphan,
) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    let (n, s) = (node.clone(), name.clone());
    let (found, _) = ctl.db(move |conn| find(conn, &n, &s)).await?;
    let (_, agent) = ctl.agent_by_node_id(found.id).await?;
    let live = agent
        .get_instance(name.clone())
        .await
        .map_err(ActionError::on_node(node.clone()))?;
    let limits = live.limits.ok_or_else(|| {
        ActionError::conflict(
            None,
            format!("LXD holds no limits for {name}; delete it instead"),
        )
    })?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let (found, orphan) = find(conn, &node, &name)?;
            let owner = User::by_username(conn, &req.owner)?
                .ok_or_else(|| ActionError::invalid("owner", format!("no user {}", req.owner)))?;
            let image = Image::lookup(conn, &req.image)?
                .ok_or_else(|| ActionError::invalid("image", format!("no image {}", req.image)))?;
            let port = orphan
                .ssh_port
                .filter(|p| (found.ssh_port_first..=found.ssh_port_last).contains(p));
            let state = match orphan.status {
                ObservedState::Running => DesiredState::Running,
                _ => DesiredState::Stopped,
            };
            // The orphan's port passes to the instance: no instance may take a port an orphan
            // still holds.
            Orphan::delete(conn, found.id, &name)?;
            Instance::insert_adopted(
                conn,
                &name,
                owner.id,
                image.id,
                found.id,
                port,
                state,
                orphan.status,
                (
                    limits.cpu as i32,
                    limits.memory_mib as i64,
                    limits.disk_gib as i64,
                ),
            )
            .map_err(|e| {
                ActionError::from_unique_on(
                    e,
                    "instances_name_key",
                    "name",
                    "an instance with this name exists",
                )
            })?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::AdoptOrphan,
                AuditObject::Instance,
                &name,
                json!({"node": node, "owner": req.owner, "image": req.image, "ssh_port": port}),
            )?;
            Ok(())
        })
    })
    .await
}
