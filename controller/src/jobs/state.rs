//! The `start`, `stop`, `restart` and `evacuate_stop` steps: the container's state changed on
//! its node, GPUs taken again before a start and given back after a reclaimer's stop, and the
//! owner's keys applied after a start.

use cohort_proto::agent::{StateAction, StateChange};
use cohort_proto::api::instances::{DesiredState, ObservedState};

use super::gpus::{give_gpus_back, take_gpus_again};
use super::outcome::StepOutcome;
use super::Job;
use crate::agent_client::observed;
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;
use crate::jobs::access::push_or_retry;
use crate::jobs::StepKind;

pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let action = match item.action {
        StepKind::Start => StateAction::Start,
        StepKind::Restart => StateAction::Restart,
        _ => StateAction::Stop,
    };
    // A node's evacuation or restore stops and starts to move, whatever the desired state.
    let moving = matches!(job, Job::EvacuateNode(_) | Job::RestoreNode(_));
    if let Some(why) = superseded(item.action, instance.desired_state).filter(|_| !moving) {
        return Ok(StepOutcome::Cancelled(why));
    }
    let options = job.state_change();
    if matches!(action, StateAction::Start | StateAction::Restart) && instance.gpu_count > 0 {
        if let Some(wait) = take_gpus_again(ctl, item, instance, node, agent, action).await? {
            return Ok(wait);
        }
    }
    let change = StateChange {
        action,
        timeout_s: options.timeout_s,
        force: options.force || item.action == StepKind::EvacuateStop,
    };
    let now = agent
        .change_state(instance.name.clone(), change)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let (id, state) = (instance.id, observed(&now.status));
    ctl.db(move |conn| Ok(Instance::set_observed(conn, id, state, None)?))
        .await?;
    if action == StateAction::Stop && options.release_gpus && state == ObservedState::Stopped {
        give_gpus_back(ctl, instance, node, agent).await?;
    }
    // Keys added or removed while it was stopped take effect now.
    if state == ObservedState::Running
        && matches!(action, StateAction::Start | StateAction::Restart)
    {
        push_or_retry(ctl, instance, "a start").await;
    }
    Ok(StepOutcome::Done)
}

/// Why a start, restart or stop step no longer applies: the instance's desired state was changed
/// after the step was asked for (a stop sent just after a start, or a reclaimer's stop after a
/// student's start). Operations on one instance run in the order they were asked for, and each
/// re-reads the desired state here, so the last request wins. An evacuation's stop keeps the
/// desired state (the instance is to run again on restore) and always applies, as does any step
/// of a node's evacuation or restore.
fn superseded(step: StepKind, desired: DesiredState) -> Option<String> {
    let wanted = match step {
        StepKind::Start | StepKind::Restart => DesiredState::Running,
        StepKind::Stop => DesiredState::Stopped,
        _ => return None,
    };
    (desired != wanted).then(|| {
        format!(
            "superseded: the instance's desired state is now {}, not {}",
            desired.as_str(),
            wanted.as_str()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_against_the_desired_state_is_superseded() {
        assert!(superseded(StepKind::Start, DesiredState::Running).is_none());
        assert!(superseded(StepKind::Stop, DesiredState::Stopped).is_none());
        assert!(superseded(StepKind::EvacuateStop, DesiredState::Running).is_none());
        let why = superseded(StepKind::Start, DesiredState::Stopped).unwrap();
        assert!(why.contains("desired state is now stopped"), "{why}");
        assert!(superseded(StepKind::Stop, DesiredState::Running).is_some());
        assert!(superseded(StepKind::Restart, DesiredState::Deleted).is_some());
    }
}
