//! Distributing an image ahead of a class: every online node that lacks it fetches it from the
//! controller's store now, rather than when its first container is created, as one operation
//! whose items (one per node) show the progress.

use cohort_proto::api::images::{ImageDistribution, SkippedNode};
use cohort_proto::api::operations::OperationKind;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::operations::{start, Step};
use crate::auth::Caller;
use crate::controller::Controller;
use crate::error::{ActionError, ActionResult};
use crate::models::audit;
use crate::models::image::Image;
use crate::models::node::Node;
use crate::models::operation::Operation;
use crate::models::operation_item::OperationItem;
use crate::steps::{ensure_image, StepOutcome};
use crate::views;

/// The item action: the node named by the item's target imports the operation's image.
pub const STEP: &str = "import_image";

/// `POST /api/v1/images/{name}/distribute` (instructor, admin, as publishing): one item per
/// online node that does not hold the image; nodes that hold it, or are not online, are
/// answered as such and not asked.
pub async fn distribute(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<ImageDistribution> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let image = Image::lookup(conn, &name)?.ok_or_else(|| ActionError::Missing {
                field: "alias".into(),
                what: format!("image {name}"),
            })?;
            let mut to_do = Vec::new();
            let mut already_held = Vec::new();
            let mut skipped = Vec::new();
            for node in Node::list(conn)? {
                if Image::held_by(conn, image.id, node.id)? {
                    already_held.push(node.name);
                } else if node.state != "online" {
                    skipped.push(SkippedNode {
                        node: node.name,
                        state: node.state,
                    });
                } else {
                    to_do.push(node.name);
                }
            }
            let steps: Vec<Step<'_>> = to_do
                .iter()
                .map(|node| Step {
                    action: STEP,
                    target: node,
                    instance_id: None,
                })
                .collect();
            let op = start(
                conn,
                OperationKind::DistributeImage,
                Some(caller.user.id),
                &image.alias,
                json!({"image_id": image.id, "fingerprint": image.fingerprint}),
                &steps,
            )?;
            for item in OperationItem::for_operation(conn, op.id)? {
                OperationItem::set_node(conn, item.id, &item.target)?;
            }
            audit::record(
                conn,
                caller.name(),
                "distribute",
                "image",
                &image.alias,
                json!({"operation": op.id, "nodes": to_do, "already_held": already_held}),
            )?;
            Ok(ImageDistribution {
                operation: views::operation(conn, &op)?,
                already_held,
                skipped,
            })
        })
    })
    .await
}

/// Runs one item: the node imports the image unless the catalog already records it there (an
/// instance created meanwhile fetched it), through the same import a create uses.
pub async fn import_step(
    ctl: &Controller,
    op: &Operation,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Some(image_id) = op.payload["image_id"].as_i64() else {
        return Ok(StepOutcome::Failed("the operation names no image".into()));
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
