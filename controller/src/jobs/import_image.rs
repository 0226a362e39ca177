//! Bringing an image onto a node: on demand before a create, and the `import_image` step of an
//! image distribution (one item per node).

use cohort_proto::agent::ImportImage;
use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::payload::{Distribute, Job};
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::models::image::Image;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;

/// Fetches the image onto the node from the controller's store if the node lacks it.
pub(crate) async fn ensure_image(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    image: &Image,
) -> Result<(), ActionError> {
    let (image_id, node_id) = (image.id, node.id);
    if ctl
        .db(move |conn| Ok(Image::held_by(conn, image_id, node_id)?))
        .await?
    {
        return Ok(());
    }
    import_image(ctl, node, agent, image).await
}

/// Has the agent fetch the image from the controller's store and alias it.
pub async fn import_image(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    image: &Image,
) -> Result<(), ActionError> {
    let (image_id, node_id) = (image.id, node.id);
    let url = format!(
        "{}/api/v1/images/{}/tarball",
        ctl.config.public_url(),
        image.fingerprint
    );
    agent
        .import_image(ImportImage {
            url,
            alias: image.alias.clone(),
            fingerprint: image.fingerprint.clone(),
        })
        .await
        .map_err(ActionError::on_node(&node.name))?;
    ctl.db(move |conn| Ok(Image::mark_held(conn, image_id, node_id)?))
        .await
}

/// Runs one item: the node imports the image unless the catalog already records it there (an
/// instance created meanwhile fetched it), through the same import a create uses.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Job::DistributeImage(Distribute { image_id, .. }) = *job else {
        return Ok(StepOutcome::Failed(
            "an import_image step belongs to a distribute_image operation".into(),
        ));
    };
    let (item_id, node_name) = (item.id, item.target.clone());
    let found = ctl
        .db(move |conn| {
            OperationItem::start_attempt(conn, item_id)?;
            Ok((
                Image::find(conn, image_id).optional()?,
                Node::by_name(conn, &node_name)?,
            ))
        })
        .await?;
    let (Some(image), Some(node)) = found else {
        return Ok(StepOutcome::Cancelled(
            "the image or the node is gone".into(),
        ));
    };
    let (node, agent) = ctl.agent_by_node_id(node.id).await?;
    ensure_image(ctl, &node, agent.as_ref(), &image).await?;
    Ok(StepOutcome::Done)
}
