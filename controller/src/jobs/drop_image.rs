//! `drop_image`: a deleted catalog image's copy (and its alias) taken off a node that held it,
//! one item per node. The catalog refuses to delete an image any instance record uses, so no
//! container Cohort knows of still needs the copy; a node LXD already lacks it on (an earlier
//! attempt, an admin with `lxc`) is done. An image uploaded again with the same fingerprint
//! before the item runs is wanted again: its copy stays.

use super::outcome::StepOutcome;
use super::payload::{DropImage, Job};
use crate::app::state::Controller;
use crate::db::models::image::Image;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;

/// Runs a `drop_image` item (its target is the node).
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Job::DropImage(DropImage { fingerprint, .. }) = job else {
        return Ok(StepOutcome::Failed(format!(
            "a drop_image item in a {} operation",
            job.kind()
        )));
    };
    let (item_id, node_name, fp) = (item.id, item.target.clone(), fingerprint.clone());
    let (node, catalogued) = ctl
        .db(move |conn| {
            OperationItem::start_attempt(conn, item_id)?;
            let catalogued = Image::lookup(conn, &fp)?.is_some_and(|i| i.fingerprint == fp);
            Ok((Node::by_name(conn, &node_name)?, catalogued))
        })
        .await?;
    // A node removed since took its images with it.
    let Some(node) = node else {
        return Ok(StepOutcome::Done);
    };
    if catalogued {
        return Ok(StepOutcome::Done);
    }
    let (_, agent) = ctl.agent_by_node_id(node.id).await?;
    agent
        .delete_image(fingerprint.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(StepOutcome::Done)
}
