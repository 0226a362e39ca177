//! The `archive_home` step: one student's home volume exported by its node's agent as a gzip
//! tarball of its files and streamed into the archive store, hashed (SHA-256) and counted on
//! the way, never held whole in memory. The tarball lands in a temporary file beside its place
//! and is renamed over `<course>/<user>.tar.gz` only once the whole stream arrived; then the
//! row records it (replacing an earlier archive of the same student). A failed or repeated try
//! leaves nothing half-made: the temporary file goes with it.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::outcome::StepOutcome;
use super::payload::{Archive, Job};
use crate::agent_client::{AgentError, NodeAgent};
use crate::app::state::Controller;
use crate::courses::archive::archive_path;
use crate::db::models::course::Course;
use crate::db::models::course_archive::CourseArchive;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::user::User;
use crate::error::ActionError;
use crate::jobs::StepKind;
use crate::placement::home_size::home_volume;
use cohort_proto::api::operations::OperationStatus;

/// Longest the node may send nothing, and longest one home may take in all.
const SOURCE_IDLE: Duration = Duration::from_secs(120);
const ARCHIVE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Runs one item: its instance is a student's container of the course.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    // A teardown's archives are kept the course's own days, read when its step runs.
    let (course, days) = match job {
        Job::ArchiveCourse(Archive { course, days }) => (course, Some(*days)),
        Job::TeardownCourse(t) if t.archive => (&instance_course(ctl, instance).await?, None),
        _ => {
            return Ok(StepOutcome::Failed(
                "an archive_home step belongs to an archive_course operation or an archiving \
                 teardown"
                    .into(),
            ))
        }
    };
    let (code, owner) = (course.clone(), instance.owner_id);
    let default = ctl.config.server.archive_days;
    let (course, user, days) = ctl
        .db(move |conn| {
            let course = Course::by_code(conn, &code)?;
            let days = match (days, &course) {
                (Some(days), _) => days,
                (None, Some(c)) => crate::courses::archive::days_of(conn, c.id, default)?,
                (None, None) => default,
            };
            Ok((course, User::find(conn, owner)?, days))
        })
        .await?;
    let Some(course) = course else {
        return Ok(StepOutcome::Cancelled("the course is gone".into()));
    };
    let target = archive_path(ctl, &course.code, &user.username)?;
    let dir = target
        .parent()
        .ok_or_else(|| ActionError::Internal("an archive path has no folder".into()))?
        .to_path_buf();
    tokio::fs::create_dir_all(&dir).await?;
    let volume = home_volume(&instance.name);
    let started = Instant::now();
    let chunks = match agent.archive_volume(volume.clone()).await {
        Err(AgentError::Status { status: 404, .. }) => {
            return Ok(StepOutcome::Failed(format!(
                "{}'s home volume {volume} is not on node {}",
                user.username, node.name
            )))
        }
        other => other.map_err(ActionError::on_node(&node.name))?,
    };
    // Removed on drop unless persisted: a failed try leaves no part behind.
    let part = tempfile::Builder::new()
        .prefix(&format!(".{}.", user.username))
        .suffix(".part")
        .tempfile_in(&dir)?;
    let (std_file, part_path) = part.into_parts();
    let mut file = tokio::fs::File::from_std(std_file);
    let (sha256, bytes) =
        match tokio::time::timeout(ARCHIVE_TIMEOUT, copy(chunks, &mut file, &node.name)).await {
            Ok(copied) => copied?,
            Err(_) => {
                return Err(ActionError::Internal(format!(
                    "archiving {volume} took over {ARCHIVE_TIMEOUT:?}"
                )))
            }
        };
    file.sync_all().await?;
    drop(file);
    part_path
        .persist(&target)
        .map_err(|e| ActionError::Io(e.error))?;
    let (course_id, user_id, path) = (course.id, user.id, target.display().to_string());
    let (sha, days) = (sha256.clone(), i32::try_from(days).unwrap_or(i32::MAX));
    ctl.db(move |conn| {
        Ok(CourseArchive::put(
            conn,
            course_id,
            user_id,
            &path,
            &sha,
            bytes as i64,
            days,
        )?)
    })
    .await?;
    tracing::info!(instance = %instance.name, node = %node.name, bytes, %sha256,
                   seconds = started.elapsed().as_secs_f64(), "home archived");
    Ok(StepOutcome::Done)
}

/// The code of the course `instance` belongs to (a teardown's payload does not name it).
async fn instance_course(ctl: &Controller, instance: &Instance) -> Result<String, ActionError> {
    let id = instance
        .course_id
        .ok_or_else(|| ActionError::Internal(format!("{} is in no course", instance.name)))?;
    ctl.db(move |conn| Ok(CourseArchive::course_code(conn, id)?))
        .await
}

/// Whether a deleting teardown may delete `instance`'s home: always, unless it archives the
/// homes first, and then only once this operation's `archive_home` item for the instance
/// succeeded (a home whose archive failed is kept, never lost).
pub async fn home_may_go(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
    instance_id: i64,
) -> Result<bool, ActionError> {
    if !matches!(job, Job::TeardownCourse(t) if t.archive) {
        return Ok(true);
    }
    let operation = item.operation_id;
    let items = ctl
        .db(move |conn| Ok(OperationItem::for_operation(conn, operation)?))
        .await?;
    Ok(items.iter().any(|i| {
        i.action == StepKind::ArchiveHome
            && i.instance_id == Some(instance_id)
            && i.status == OperationStatus::Success
    }))
}

/// Writes the stream into `file`; its SHA-256 and length.
async fn copy(
    mut chunks: crate::agent_client::AgentStream,
    file: &mut tokio::fs::File,
    node: &str,
) -> Result<(String, u64), ActionError> {
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    loop {
        let chunk = match tokio::time::timeout(SOURCE_IDLE, chunks.next()).await {
            Ok(Some(chunk)) => chunk.map_err(ActionError::on_node(node))?,
            Ok(None) => break,
            Err(_) => {
                return Err(ActionError::on_node(node)(AgentError::Unreachable(
                    format!("the node sent nothing for {SOURCE_IDLE:?}"),
                )))
            }
        };
        hasher.update(&chunk);
        bytes += chunk.len() as u64;
        file.write_all(&chunk).await?;
    }
    if bytes == 0 {
        return Err(ActionError::Internal(
            "the node sent an empty archive".into(),
        ));
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}
