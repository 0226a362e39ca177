//! `delete_orphan`: a container no record describes (an orphan the poller found) deleted from its
//! node, then its record (and with it the port it held). A node whose agent cannot be reached
//! keeps the step waiting, its reason on the item; an agent's refusal fails it with the reason.

use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::payload::Job;
use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::orphan::Orphan;
use crate::error::ActionError;

/// Runs a `delete_orphan` item.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Job::DeleteOrphan(orphan) = job else {
        return Ok(StepOutcome::Failed(format!(
            "a delete_orphan item in a {} operation",
            job.kind()
        )));
    };
    let (node, name) = (orphan.node.clone(), orphan.name.clone());
    let item_id = item.id;
    let found = ctl
        .db({
            let node = node.clone();
            move |conn| {
                OperationItem::start_attempt(conn, item_id)?;
                Ok(Node::by_name(conn, &node)?)
            }
        })
        .await?;
    // A node removed since: its containers went with it.
    let Some(found) = found else {
        return Ok(StepOutcome::Done);
    };
    let (_, agent) = ctl.agent_by_node_id(found.id).await?;
    match agent.delete_instance(name.clone()).await {
        Ok(()) => {}
        // Already gone from LXD (an earlier attempt, or an admin with `lxc`).
        Err(AgentError::Status { status: 404, .. }) => {}
        Err(e) => return Err(ActionError::on_node(node)(e)),
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            Orphan::delete(conn, found.id, &name)?;
            Ok(())
        })
    })
    .await?;
    Ok(StepOutcome::Done)
}
