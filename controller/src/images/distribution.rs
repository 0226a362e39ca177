//! Distributing an image ahead of a class: every online node that lacks it fetches it from the
//! controller's store now, rather than when its first container is created, as one operation
//! whose items (one per node) show the progress.

use cohort_proto::api::images::{ImageDistribution, SkippedNode};
use cohort_proto::api::nodes::NodeState;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::image::Image;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::views;

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
                } else if node.state != NodeState::Online {
                    skipped.push(SkippedNode {
                        node: node.name,
                        state: node.state.to_string(),
                    });
                } else {
                    to_do.push(node.name);
                }
            }
            let steps: Vec<Step<'_>> = to_do
                .iter()
                .map(|node| Step::new(StepKind::ImportImage, node, None))
                .collect();
            let op = enqueue(
                conn,
                &payload::Job::DistributeImage(payload::Distribute {
                    image_id: image.id,
                    fingerprint: image.fingerprint.clone(),
                }),
                Some(caller.user.id),
                &image.alias,
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Distribute,
                    object_kind: AuditObject::Image,
                    object: &image.alias,
                    detail: json!({ "nodes": to_do, "already_held": already_held}),
                }),
            )?;
            for item in OperationItem::for_operation(conn, op.id)? {
                OperationItem::set_node(conn, item.id, &item.target)?;
            }
            Ok(ImageDistribution {
                operation: views::operation(conn, &op)?,
                already_held,
                skipped,
            })
        })
    })
    .await
}
