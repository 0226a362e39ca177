//! The `reset` step: the container is deleted (its home volume stays) so the next `create`
//! step makes it afresh from the template.

use cohort_proto::api::instances::ObservedState;

use super::outcome::StepOutcome;
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::error::ActionError;

/// Deletes the container (its home volume stays) so the next `create` step makes it afresh.
pub async fn run(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    agent
        .delete_instance(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let id = instance.id;
    ctl.db(move |conn| {
        Ok(Instance::set_observed(
            conn,
            id,
            ObservedState::Pending,
            None,
        )?)
    })
    .await?;
    Ok(StepOutcome::Done)
}
