//! Moving one instance to another node with its data: the `move` step (`cohort move`, and
//! `restore` bringing back what an evacuation moved) and the `evacuate_move` step (the target
//! chosen as placement would). The order keeps the student a working container at every point:
//!
//! 1. Copy ([`transfer`]): the container is stopped on the source, and it and its home are
//!    exported and imported on the target. A failure here, or a target found without room,
//!    deletes what reached the target and starts the source again: the database never named the
//!    target, and nothing on the source was changed but the stop. Before it, both agents are
//!    asked where complete copies really are ([`copies`]): the database may be stale (a backup
//!    restored from mid-move, a second run), and a copy found only on the target is kept and
//!    the database pointed at it; with none anywhere nothing is deleted and an admin is asked.
//! 2. Commit ([`crate::placement::move_room`]): one transaction makes the instance the target's, its port allocated
//!    there and the source's freed, its GPU slots moved. The source's copies are still there.
//! 3. Settle: the target makes the imported container its own (SSH forward on its address and
//!    the new port, GPUs, NIC, id range) and starts it when it ran before. A failure here moves
//!    the instance back (commit to the source, settle there, delete the target's copies): the
//!    student gets the source's container back as it was. A crash between 2 and 3 resumes at 3.
//! 4. Only then are the source's copies deleted.
//!
//! The container keeps its files, its SSH host key (in its root filesystem and its config) and
//! its user's keys; only its endpoint (node and port) changes.

use cohort_proto::agent::{Arrival, StateAction, StateChange};
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;

use crate::jobs::StepKind;

pub mod copies;
pub mod transfer;

use self::copies::Holder;
use self::transfer::Side;
use super::gpus::attachment;
use super::{Job, StepOutcome};
use crate::accounts::ssh::ssh_access;
use crate::agent_client::observed;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;
use crate::error::ActionError;
use crate::placement::move_room::{self as room, Committed};

/// The node the instance leaves: recorded on the item when it was queued (the node it was on).
fn source_name(op: &Operation, item: &OperationItem, current: &Node) -> String {
    item.node_name.clone().unwrap_or_else(|| {
        if item.action == StepKind::EvacuateMove {
            op.target.clone()
        } else {
            current.name.clone()
        }
    })
}

/// Runs a `move` or `evacuate_move` item on `instance`, now on `current`.
pub async fn run(
    ctl: &Controller,
    op: &Operation,
    job: &Job,
    item: &OperationItem,
    instance: &Instance,
    current: &Node,
) -> Result<StepOutcome, ActionError> {
    let source = source_name(op, item, current);
    let lookup = source.clone();
    let Some(source) = ctl
        .db(move |conn| Ok(Node::by_name(conn, &lookup)?))
        .await?
    else {
        return Ok(StepOutcome::Failed(format!("node {source} is gone")));
    };
    let (source, source_agent) = ctl.agent_by_node_id(source.id).await?;
    let home = instance.course_id.is_some();
    let running = instance.desired_state == DesiredState::Running;
    let from = Side {
        node: &source,
        agent: source_agent.as_ref(),
    };
    if instance.node_id == Some(source.id) {
        let (row, placement) = (instance.clone(), ctl.config.placement.clone());
        let named = job.move_target().map(String::from);
        let target = ctl
            .db(move |conn| match named {
                Some(name) => Ok(Node::by_name(conn, &name)?),
                None => Ok(room::choose(conn, &row, &placement)?),
            })
            .await?;
        let Some(target) = target else {
            return Ok(StepOutcome::Failed(match job.move_target() {
                Some(name) => format!("node {name} is gone"),
                None => "no other node has room for it".into(),
            }));
        };
        if target.id == source.id {
            return Ok(StepOutcome::Done);
        }
        let (target, target_agent) = ctl.agent_by_node_id(target.id).await?;
        let to = Side {
            node: &target,
            agent: target_agent.as_ref(),
        };
        // The database may be stale (a restored backup, a second run): where the copies
        // really are decides, and the last copy is never deleted.
        match copies::locate(&instance.name, home, &from, &to).await? {
            Holder::Source | Holder::Both => {
                if let Err(e) = transfer::copy(&instance.name, home, &from, &to).await {
                    transfer::undo(&instance.name, home, running, &from, &to).await;
                    return Err(e);
                }
                match commit(ctl, op, instance, &source, &target, true).await {
                    Ok(()) => {}
                    Err(ActionError::NoCapacity(why)) => {
                        transfer::undo(&instance.name, home, running, &from, &to).await;
                        return Ok(StepOutcome::Failed(why));
                    }
                    Err(e) => {
                        transfer::undo(&instance.name, home, running, &from, &to).await;
                        return Err(e);
                    }
                }
            }
            // The move got past its copy before: the target's copy is kept and the database
            // named it (no room check: it holds that room already); settling goes on below.
            Holder::Target => {
                tracing::warn!(instance = %instance.name, source = %source.name, target = %target.name,
                               "its only complete copy is on the move's target already; keeping it");
                match commit(ctl, op, instance, &source, &target, false).await {
                    Ok(()) => {}
                    Err(ActionError::NoCapacity(why)) => {
                        return Ok(StepOutcome::Failed(format!(
                            "its only complete copy is on node {}, kept there, but the database \
                             cannot name that node ({why}): an admin must make room",
                            target.name
                        )))
                    }
                    Err(e) => return Err(e),
                }
            }
            Holder::Neither => {
                return Ok(StepOutcome::Failed(format!(
                    "neither node {} nor node {} holds a complete copy of its container; \
                     nothing was deleted: an admin must find its data before it can move",
                    source.name, target.name
                )))
            }
        }
    }
    // The instance is the target's now (a retry after a crash past the commit starts here).
    let id = instance.id;
    let Some(moved) = ctl
        .db(move |conn| Ok(Instance::find(conn, id).optional()?))
        .await?
    else {
        return Ok(StepOutcome::Cancelled("its instance is gone".into()));
    };
    let Some(node_id) = moved.node_id.filter(|&n| n != source.id) else {
        return Ok(StepOutcome::Done);
    };
    let (target, target_agent) = ctl.agent_by_node_id(node_id).await?;
    let to = Side {
        node: &target,
        agent: target_agent.as_ref(),
    };
    if let Err(e) = settle(ctl, &moved, &to).await {
        return move_back(ctl, op, &moved, &from, &to, e).await;
    }
    transfer::remove_copies(&moved.name, home, &from).await?;
    Ok(StepOutcome::Done)
}

/// Step 2: the instance becomes `to`'s in the database, audited as the operation's author;
/// `check_room`: only when `to` has room for it (see [`room::commit`]).
async fn commit(
    ctl: &Controller,
    op: &Operation,
    instance: &Instance,
    from: &Node,
    to: &Node,
    check_room: bool,
) -> Result<(), ActionError> {
    let (id, name, by) = (instance.id, instance.name.clone(), op.created_by);
    let (from, to, placement) = (from.clone(), to.clone(), ctl.config.placement.clone());
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let committed = room::commit(conn, id, from.id, &to, &placement, check_room)?;
            if let Committed::Moved { port } = committed {
                let actor = audit::actor(conn, by)?;
                audit::record(
                    conn,
                    &actor,
                    AuditAction::Moved,
                    AuditObject::Instance,
                    &name,
                    serde_json::json!({"from": from.name, "to": to.name, "ssh_port": port}),
                )?;
            }
            Ok(())
        })
    })
    .await?;
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

/// Step 3: `side` makes the imported container its own and starts it if it is wanted running.
async fn settle(ctl: &Controller, instance: &Instance, side: &Side<'_>) -> Result<(), ActionError> {
    let (owner_id, id, row) = (instance.owner_id, instance.id, instance.clone());
    let (owner, keys, gpus, gpu_memory) = ctl
        .db(move |conn| {
            Ok((
                User::find(conn, owner_id)?,
                SshKey::for_user(conn, owner_id)?,
                GpuAllocation::for_instance(conn, id)?,
                crate::jobs::gpus::course_gpu_memory(conn, &row)?,
            ))
        })
        .await?;
    let arrival = Arrival {
        ssh: ssh_access(&owner, &keys, instance, side.node),
        gpus: gpus
            .iter()
            .map(|(g, _)| attachment(g, instance, gpu_memory))
            .collect(),
    };
    let node = side.node.name.clone();
    side.agent
        .arrive(instance.name.clone(), arrival)
        .await
        .map_err(ActionError::on_node(&node))?;
    if instance.desired_state != DesiredState::Running {
        return Ok(());
    }
    let start = StateChange {
        action: StateAction::Start,
        timeout_s: None,
        force: false,
    };
    let now = side
        .agent
        .change_state(instance.name.clone(), start)
        .await
        .map_err(ActionError::on_node(&node))?;
    let state = observed(&now.status);
    ctl.db(move |conn| Ok(Instance::set_observed(conn, id, state, None)?))
        .await?;
    // Keys added or removed while it moved take effect now.
    super::access::push_or_retry(ctl, instance, "a move").await;
    Ok(())
}

/// After the target failed to run the moved container (`why`): the instance is the source's
/// again, settled and started there, and the target's copies go. The operation reports the
/// failure; the student has the container they had.
async fn move_back(
    ctl: &Controller,
    op: &Operation,
    instance: &Instance,
    from: &Side<'_>,
    to: &Side<'_>,
    why: ActionError,
) -> Result<StepOutcome, ActionError> {
    // Moving back is only for a source that still holds its copy; otherwise the target's is
    // the only one and settling there is retried.
    if !copies::complete(&instance.name, instance.course_id.is_some(), from).await? {
        return Err(why);
    }
    tracing::warn!(instance = %instance.name, node = %to.node.name, error = %why, "a moved container did not run on its new node; moving it back");
    // No room check: the source held it a moment ago, and an evacuating source takes no one
    // else (only a port is taken again, the one it had when free).
    commit(ctl, op, instance, to.node, from.node, false).await?;
    let id = instance.id;
    let back = ctl.db(move |conn| Ok(Instance::find(conn, id)?)).await?;
    settle(ctl, &back, from).await?;
    let home = instance.course_id.is_some();
    transfer::remove_copies(&instance.name, home, to).await?;
    Ok(StepOutcome::Failed(format!(
        "it did not run on node {} ({why}); it runs on node {} again",
        to.node.name, from.node.name
    )))
}
