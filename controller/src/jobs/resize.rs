//! The `set_limits` step of a course's `set_course_limits` operation: the agent sets a
//! container's cores and memory to its row's (LXD sets a running container's cgroup at once, a
//! stopped one's at its next start).

use cohort_proto::agent::LiveLimits;

use super::outcome::StepOutcome;
use crate::agent_client::{AgentError, NodeAgent};
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::error::ActionError;

/// The step: has the agent set the container's cores and memory to its row's. The same values
/// again change nothing, so a retried step is harmless; a container not made (any more) is
/// made from its row, with them, so there is nothing to do.
pub async fn run(
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let limits = LiveLimits {
        cpu: instance.cpu as u32,
        memory_mib: instance.memory_mib as u64,
    };
    match agent.set_limits(instance.name.clone(), limits).await {
        Ok(_) | Err(AgentError::Status { status: 404, .. }) => Ok(StepOutcome::Done),
        Err(source) => Err(ActionError::on_node(&node.name)(source)),
    }
}
