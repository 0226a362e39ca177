//! A create that failed for good: the instance shows the failure (`error` state and the reason)
//! and lets go of what placement gave it (node capacity, SSH port, GPU slots), so a broken
//! request never holds a port or a GPU that others could use. Unless a container the create made
//! may still be on the node (it could not be removed, or the node could not say): then the
//! instance keeps its node and port, so that deleting it removes the container there rather
//! than report success and leave it behind. And unless the node holds the instance's own
//! container, made by an earlier create of it (a repair that met the container it thought
//! missing): then nothing is freed, since a running container still holds that port and GPU.

use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::prelude::*;

use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::instance::Instance;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;

/// Marks the item's instance failed with `why` and frees its placement. What the failed attempts
/// left on the node is removed first, but only a container this very item made (its idempotency
/// key is the item's id): a container of the same name that Cohort did not make is left alone.
pub async fn release(ctl: &Controller, item: &OperationItem, why: &str) -> Result<(), ActionError> {
    let Some(id) = item.instance_id else {
        return Ok(());
    };
    let Some(instance) = ctl
        .db(move |conn| Ok(Instance::find(conn, id).optional()?))
        .await?
    else {
        return Ok(());
    };
    if instance.node_id.is_none() && instance.observed_state == ObservedState::Error {
        // Already failed and released (a later step found it so).
        return Ok(());
    }
    if instance.desired_state == DesiredState::Deleted {
        // Its delete frees everything anyway.
        return Ok(());
    }
    let clean = match instance.node_id {
        Some(node_id) => {
            match remove_own_leftover(ctl, node_id, id, &instance.name, &item.id.to_string()).await
            {
                Leftover::Clean => true,
                Leftover::Kept => false,
                Leftover::TheInstance => {
                    tracing::warn!(instance = %instance.name, "failed create: the node holds the instance's own container; nothing freed");
                    return Ok(());
                }
            }
        }
        None => true,
    };
    let why = why.to_string();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            GpuAllocation::release(conn, id)?;
            if clean {
                Instance::fail_placement(conn, id, &why)?;
            } else {
                Instance::fail_in_place(conn, id, &why)?;
            }
            Ok(())
        })
    })
    .await?;
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

/// What the node holds under the instance's name after a failed create.
enum Leftover {
    /// No container of that name, or one Cohort did not make for this instance (left alone),
    /// or this create's own, now removed.
    Clean,
    /// This create's own that could not be removed, or the node could not say.
    Kept,
    /// The instance's container, made by an earlier create of it: the instance exists.
    TheInstance,
}

/// Removes what this create (key `key`) left on the node, and says what the node holds.
async fn remove_own_leftover(
    ctl: &Controller,
    node_id: i64,
    instance_id: i64,
    name: &str,
    key: &str,
) -> Leftover {
    let (node, agent) = match ctl.agent_by_node_id(node_id).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(instance = name, error = %e, "failed create: node unreachable, leftover kept");
            return Leftover::Kept;
        }
    };
    let found_key = match agent.get_instance(name.to_string()).await {
        Ok(lx) => lx.idempotency_key,
        Err(AgentError::Status { status: 404, .. }) => return Leftover::Clean,
        Err(e) => {
            tracing::warn!(instance = name, node = %node.name, error = %e, "failed create: the node could not say what it holds");
            return Leftover::Kept;
        }
    };
    let Some(found_key) = found_key else {
        return Leftover::Clean;
    };
    if found_key != key {
        let earlier = ctl
            .db(move |conn| Ok(OperationItem::made_for(conn, &found_key, instance_id)?))
            .await;
        return match earlier {
            Ok(true) => Leftover::TheInstance,
            Ok(false) => Leftover::Clean,
            // Unsure whose it is: keep everything rather than free a running container's GPU.
            Err(_) => Leftover::Kept,
        };
    }
    match agent.delete_instance(name.to_string()).await {
        Ok(()) => Leftover::Clean,
        Err(e) => {
            tracing::warn!(instance = name, node = %node.name, error = %e, "failed create: leftover not removed");
            Leftover::Kept
        }
    }
}
