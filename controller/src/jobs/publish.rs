//! The `publish` step: a stopped instance exported as a catalog image.

use cohort_proto::agent::PublishInstance;
use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::payload::{Job, Publish};
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::image::{Image, NewImage};
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation::Operation;
use crate::error::ActionError;

/// The agent exports the stopped instance as an image (kept on its node under the alias); the
/// tarball lands in the catalog directory under its SHA-256 (which must be LXD's fingerprint),
/// and the catalog row records the node as holding it.
pub async fn run(
    ctl: &Controller,
    op: &Operation,
    job: &Job,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let Job::PublishImage(Publish { alias, description }) = job.clone() else {
        return Ok(StepOutcome::Failed(format!(
            "a publish step belongs to a publish_image operation, not a {}",
            op.kind
        )));
    };
    let lookup = alias.clone();
    if ctl
        .db(move |conn| Ok(Image::lookup(conn, &lookup)?))
        .await?
        .is_some()
    {
        // An earlier attempt finished before its outcome was recorded.
        return Ok(StepOutcome::Done);
    }
    let dir = ctl.images_dir();
    std::fs::create_dir_all(&dir)?;
    let temp = tempfile::Builder::new()
        .prefix(".publish-")
        .tempfile_in(&dir)?
        .into_temp_path();
    let got = agent
        .publish(
            instance.name.clone(),
            PublishInstance {
                alias: Some(alias.clone()),
                description: description.clone(),
                keep: true,
            },
            temp.to_path_buf(),
        )
        .await
        .map_err(ActionError::on_node(&node.name))?;
    if got.size == 0 {
        return Ok(StepOutcome::Retry("the agent sent an empty tarball".into()));
    }
    if got.reported.as_ref().is_some_and(|r| *r != got.sha256) {
        return Ok(StepOutcome::Retry(format!(
            "the tarball's SHA-256 {} is not LXD's fingerprint {:?}",
            got.sha256, got.reported
        )));
    }
    let path = ctl.image_tarball(&got.sha256);
    temp.persist(&path).map_err(|e| ActionError::Io(e.error))?;
    let (image_id, node_id, by) = (instance.image_id, node.id, op.created_by);
    let (name, fingerprint, size) = (instance.name.clone(), got.sha256.clone(), got.size as i64);
    let stored = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let source = Image::find(conn, image_id)?;
                let image = Image::insert(
                    conn,
                    &NewImage {
                        fingerprint: &fingerprint,
                        alias: &alias,
                        description: description.as_deref().unwrap_or(""),
                        gpu_ready: source.gpu_ready,
                        size_bytes: size,
                        created_by: by,
                    },
                )?;
                Image::mark_held(conn, image.id, node_id)?;
                let actor = audit::actor(conn, by)?;
                audit::record(
                    conn,
                    &actor,
                    AuditAction::Published,
                    AuditObject::Image,
                    &alias,
                    serde_json::json!({"instance": name, "fingerprint": fingerprint}),
                )?;
                Ok(())
            })
        })
        .await;
    match stored {
        Ok(()) => Ok(StepOutcome::Done),
        Err(ActionError::Database(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        ))) => Ok(StepOutcome::Failed(format!(
            "the catalog already holds an image with fingerprint {}",
            got.sha256
        ))),
        Err(e) => Err(e),
    }
}
