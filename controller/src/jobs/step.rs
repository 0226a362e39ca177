//! Running one item of an operation: the checks every step shares (its instance still there,
//! not being deleted, placed), then the step its action names. Each step is idempotent: it looks
//! at the database and the agent and does only what is missing, and the agent dedupes creates by
//! the item id.

use std::time::Duration;

use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::{
    access, create, delete, gpus, import_image, moves, orphans, publish, reset, resize, state,
};
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;
use crate::jobs::StepKind;

/// Runs one item of `op`.
pub async fn run_step(ctl: &Controller, op: &Operation, item: &OperationItem) -> StepOutcome {
    match step(ctl, op, item).await {
        Ok(outcome) => outcome,
        Err(e) => e.into(),
    }
}

async fn step(
    ctl: &Controller,
    op: &Operation,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let job = match op.job() {
        Ok(job) => job,
        Err(e) => {
            return Ok(StepOutcome::Failed(format!(
                "the operation's payload is not a {}'s: {e}",
                op.kind
            )))
        }
    };
    if item.action == StepKind::ImportImage {
        return import_image::run(ctl, &job, item).await;
    }
    if item.action == StepKind::DropImage {
        return super::drop_image::run(ctl, &job, item).await;
    }
    if item.action == StepKind::DeleteOrphan {
        return orphans::run(ctl, &job, item).await;
    }
    if item.action == StepKind::SyncData {
        return super::sync_data::run(ctl, &job, item).await;
    }
    if access::is_access(item.action) {
        return access::run(ctl, &job, item).await;
    }
    // A delete whose instance is gone has nothing left to do (an earlier attempt, or another
    // delete, removed it); any other step on a gone instance was asked for and not done.
    let gone = || {
        if item.action == StepKind::Delete {
            StepOutcome::Done
        } else {
            StepOutcome::Cancelled("its instance is gone".into())
        }
    };
    let Some(instance_id) = item.instance_id else {
        return Ok(gone());
    };
    let instance = ctl
        .db(move |conn| Ok(Instance::find(conn, instance_id).optional()?))
        .await?;
    let Some(instance) = instance else {
        return Ok(gone());
    };
    if item.action == StepKind::Delete {
        return delete::run(ctl, &job, item, instance).await;
    }
    // A deleting teardown that archives marks its instances deleted first; their homes are
    // archived all the same, before their delete items.
    if instance.desired_state == DesiredState::Deleted && item.action != StepKind::ArchiveHome {
        return Ok(StepOutcome::Cancelled(
            "the instance is being deleted".into(),
        ));
    }
    if instance.node_id.is_none() && instance.observed_state == ObservedState::Error {
        return Ok(StepOutcome::Failed(format!(
            "the instance failed to be created: {}",
            instance.error.as_deref().unwrap_or("no reason recorded")
        )));
    }
    let Some(node_id) = instance.node_id else {
        // Queued: the item shows why (the queue keeps the reason on the instance).
        if let Some(why) = instance
            .error
            .clone()
            .filter(|e| *e != item.error.as_deref().unwrap_or(""))
        {
            let item_id = item.id;
            ctl.db(move |conn| Ok(OperationItem::note_error(conn, item_id, &why)?))
                .await?;
        }
        return Ok(StepOutcome::Wait(Duration::from_secs(
            ctl.config.placement.queue_interval_s.max(1),
        )));
    };
    let item_id = item.id;
    ctl.db(move |conn| Ok(OperationItem::start_attempt(conn, item_id)?))
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match item.action {
        StepKind::Create => create::run(ctl, item, &instance, &node, agent.as_ref()).await,
        StepKind::Start | StepKind::Stop | StepKind::Restart | StepKind::EvacuateStop => {
            state::run(ctl, &job, item, &instance, &node, agent.as_ref()).await
        }
        StepKind::Move | StepKind::EvacuateMove => {
            moves::run(ctl, op, &job, item, &instance, &node).await
        }
        StepKind::Reset => reset::run(ctl, &instance, &node, agent.as_ref()).await,
        StepKind::Publish => publish::run(ctl, op, &job, &instance, &node, agent.as_ref()).await,
        StepKind::DetachGpus => gpus::detach(ctl, &instance, &node, agent.as_ref()).await,
        StepKind::AttachGpus => match job {
            super::payload::Job::AttachGpusAgain => {
                gpus::attach_again(ctl, item, &instance, &node, agent.as_ref()).await
            }
            _ => gpus::attach(ctl, &instance, &node, agent.as_ref()).await,
        },
        StepKind::SetLimits => resize::run(&instance, &node, agent.as_ref()).await,
        StepKind::ArchiveHome => {
            super::archive::run(ctl, &job, &instance, &node, agent.as_ref()).await
        }
        StepKind::SetHomeSnapshots => {
            super::home_snapshots::run(ctl, &instance, &node, agent.as_ref()).await
        }
        StepKind::RestoreHome => {
            super::home_snapshots::restore(&job, &instance, &node, agent.as_ref()).await
        }
        StepKind::RestoreHomePath => {
            super::home_snapshots::restore_path(&job, &instance, &node, agent.as_ref()).await
        }
        StepKind::ImportImage
        | StepKind::Delete
        | StepKind::ApplyNetworkPolicy
        | StepKind::ApplySshKeys
        | StepKind::RevokeLogin
        | StepKind::DeleteOrphan
        | StepKind::DropImage
        | StepKind::SyncData => {
            unreachable!("{} items return before the instance checks", item.action)
        }
    }
}
