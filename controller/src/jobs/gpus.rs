//! GPUs in steps: how an allocated GPU is pinned, the `detach_gpus` step of the reclaimer,
//! the slots given back after a stop and taken again before a start, a lease's `attach_gpus`,
//! and **Attach a GPU again** on a running container the reclaimer took them from.

use std::time::Duration;

use cohort_proto::agent::{AttachGpus, GpuAttachment, StateAction, StateChange};
use cohort_proto::api::instances::{DesiredState, GpuShare};

use super::outcome::StepOutcome;
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::course::Course;
use crate::db::models::gpu::Gpu;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::instance::Instance;
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;
use crate::placement::gpu_slots;

/// How the agent pins an allocated GPU, and the GPU memory cap of `instance` on it
/// (`gpu_memory_mib`: its course's setting).
pub(crate) fn attachment(
    g: &Gpu,
    instance: &Instance,
    gpu_memory_mib: Option<i64>,
) -> GpuAttachment {
    GpuAttachment {
        uuid: g.uuid.clone(),
        // A MIG instance keeps its parent's PCI address (its row holds the parent's): LXD picks
        // the card a `gputype=mig` device names by `pci`, and refuses one that matches more
        // than one card, as every card does on a node of several GPUs when `pci` is left out.
        pci_address: Some(g.pci_address.clone()),
        mig_uuid: g.mig_parent.as_ref().map(|_| g.uuid.clone()),
        memory_cap_bytes: memory_cap(g, instance, gpu_memory_mib),
    }
}

/// A container sharing a whole card gets its course's `gpu_memory`, or else an equal part of
/// the card: its memory over the course's `--gpu-share N` (outside a course, the GPU's
/// `share_limit`). A MIG instance has its own memory, and an exclusive GPU is all the
/// container's: no cap.
fn memory_cap(g: &Gpu, instance: &Instance, gpu_memory_mib: Option<i64>) -> Option<u64> {
    if g.mig_parent.is_some() || instance.gpu_share == GpuShare::Exclusive {
        return None;
    }
    let sharers = instance.gpu_share_count.unwrap_or(g.share_limit);
    if sharers < 2 || g.memory_bytes <= 0 {
        return None;
    }
    let even = g.memory_bytes as u64 / sharers as u64;
    Some(gpu_memory_mib.map_or(even, |mib| (mib as u64) << 20))
}

/// The course's `gpu_memory` setting of `instance` (None outside a course or unset).
pub(crate) fn course_gpu_memory(
    conn: &mut diesel::PgConnection,
    instance: &Instance,
) -> diesel::QueryResult<Option<i64>> {
    match instance.course_id {
        Some(id) => Course::gpu_memory_of(conn, id),
        None => Ok(None),
    }
}

/// After a reclaimer's stop: the stopped container's `cohort-gpu*` devices come off first, then
/// its slots are released and the queue woken, so the GPU goes to someone waiting and a start
/// outside Cohort cannot take it back.
pub async fn give_gpus_back(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<(), ActionError> {
    let id = instance.id;
    let holds = ctl
        .db(move |conn| Ok(GpuAllocation::for_instance(conn, id)?.len()))
        .await?;
    if holds == 0 {
        return Ok(());
    }
    agent
        .detach_gpus(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let released = ctl
        .db(move |conn| Ok(GpuAllocation::release(conn, id)?))
        .await?;
    tracing::info!(instance = %instance.name, released, "GPU slots given back after a stop");
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

/// Before a start: an instance whose slots were given back takes them again on its node and
/// gets its devices back (stopped first for a restart: a MIG device cannot be hot-plugged);
/// `Some(wait)` when no GPU there has room, the reason left on the instance and the item.
pub async fn take_gpus_again(
    ctl: &Controller,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
    action: StateAction,
) -> Result<Option<StepOutcome>, ActionError> {
    let (row, item_id) = (instance.clone(), item.id);
    let taken = ctl
        .db(move |conn| {
            let taken = gpu_slots::take_again(conn, &row)?;
            match &taken {
                gpu_slots::Taken::Short(why) => {
                    Instance::set_error(conn, row.id, Some(why))?;
                    OperationItem::wait(conn, item_id, why)?;
                }
                gpu_slots::Taken::Again => InstanceUsage::clear_detached(conn, row.id)?,
                gpu_slots::Taken::Held => {}
            }
            Ok(taken)
        })
        .await?;
    match taken {
        gpu_slots::Taken::Held => Ok(None),
        gpu_slots::Taken::Short(why) => {
            tracing::info!(instance = %instance.name, %why, "start waits for a GPU");
            Ok(Some(StepOutcome::Wait(Duration::from_secs(
                ctl.config.placement.queue_interval_s.max(1),
            ))))
        }
        gpu_slots::Taken::Again => {
            if action == StateAction::Restart {
                let stop = StateChange {
                    action: StateAction::Stop,
                    timeout_s: None,
                    force: false,
                };
                agent
                    .change_state(instance.name.clone(), stop)
                    .await
                    .map_err(ActionError::on_node(&node.name))?;
            }
            let attached = attach_held(ctl, instance, node, agent).await?;
            tracing::info!(instance = %instance.name, gpus = attached, "GPU slots taken again");
            Ok(None)
        }
    }
}

/// The reclaimer's `detach`: the node takes the `cohort-gpu*` devices off the (still running)
/// container first, then the slots are released, so no GPU is ever handed out while still
/// attached.
pub async fn detach(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    agent
        .detach_gpus(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let id = instance.id;
    let released = ctl
        .db(move |conn| Ok(GpuAllocation::release(conn, id)?))
        .await?;
    tracing::info!(instance = %instance.name, released, "GPU slots released");
    ctl.capacity_freed.notify_waiters();
    // A batch job may be waiting for this GPU: the jobs' loop grants it now, not at its next tick.
    ctl.jobs_changed.notify_one();
    Ok(StepOutcome::Done)
}

/// A granted lease's `attach`: the GPU slots it took are put on the running container as its
/// `cohort-gpu*` devices. Nothing to do when the slots are gone already (the lease ended, or
/// the GPU was taken, before this step ran): the devices must not outlive the slots.
pub async fn attach(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let attached = attach_held(ctl, instance, node, agent).await?;
    if attached == 0 {
        return Ok(StepOutcome::Cancelled(
            "the lease's GPU was given back before it was attached".into(),
        ));
    }
    tracing::info!(instance = %instance.name, gpus = attached, "leased GPUs attached");
    // A batch job waits for this attach: the jobs' loop starts it now.
    ctl.jobs_changed.notify_one();
    Ok(StepOutcome::Done)
}

/// **Attach a GPU again** on a running container whose GPUs the reclaimer took: its slots are
/// taken again on its node (waiting, the reason on the item, while none has room) and its
/// devices put back while it runs.
pub async fn attach_again(
    ctl: &Controller,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    if instance.desired_state != DesiredState::Running {
        return Ok(StepOutcome::Cancelled(
            "the container was stopped: its start takes its GPUs again".into(),
        ));
    }
    let (row, item_id) = (instance.clone(), item.id);
    let taken = ctl
        .db(move |conn| {
            let taken = gpu_slots::take_again(conn, &row)?;
            match &taken {
                gpu_slots::Taken::Short(why) => {
                    OperationItem::wait(conn, item_id, why)?;
                }
                gpu_slots::Taken::Again => InstanceUsage::clear_detached(conn, row.id)?,
                gpu_slots::Taken::Held => {}
            }
            Ok(taken)
        })
        .await?;
    if let gpu_slots::Taken::Short(why) = taken {
        tracing::info!(instance = %instance.name, %why, "attaching a GPU again waits");
        return Ok(StepOutcome::Wait(Duration::from_secs(
            ctl.config.placement.queue_interval_s.max(1),
        )));
    }
    let attached = attach_held(ctl, instance, node, agent).await?;
    tracing::info!(instance = %instance.name, gpus = attached, "GPUs attached again");
    Ok(StepOutcome::Done)
}

/// Puts the GPU slots `instance` holds on its container as `cohort-gpu*` devices, capped by
/// its course's GPU memory; how many there were (none: nothing is sent to the node).
async fn attach_held(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<usize, ActionError> {
    let (id, row) = (instance.id, instance.clone());
    let (gpus, gpu_memory) = ctl
        .db(move |conn| {
            Ok((
                GpuAllocation::for_instance(conn, id)?,
                course_gpu_memory(conn, &row)?,
            ))
        })
        .await?;
    if gpus.is_empty() {
        return Ok(0);
    }
    agent
        .attach_gpus(
            instance.name.clone(),
            AttachGpus {
                gpus: gpus
                    .iter()
                    .map(|(g, _)| attachment(g, instance, gpu_memory))
                    .collect(),
            },
        )
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(gpus.len())
}
