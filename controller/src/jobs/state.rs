//! The `start`, `stop`, `restart` and `evacuate_stop` steps: the container's state changed on
//! its node, GPUs taken again before a start and given back after a reclaimer's stop, and the
//! owner's keys applied after a start.

use cohort_proto::agent::{StateAction, StateChange};
use cohort_proto::api::instances::ObservedState;

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
use crate::jobs::logins::push_ssh;
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
        if let Err(e) = push_ssh(ctl, instance).await {
            tracing::warn!(instance = %instance.name, error = %e, "applying SSH keys after start failed");
        }
    }
    Ok(StepOutcome::Done)
}
