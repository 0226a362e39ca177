//! The `sync_data` step: one node of a course brought in line with the course's datasets. The
//! node makes a volume for each version it lacks (fetched from the controller's data store,
//! hash-checked), each of the course's containers there gets exactly the course's datasets
//! mounted (students read-only, staff read-write) in one live change, and the node's dataset
//! volumes nothing may mount any more are deleted. Every part is idempotent, so a retried item
//! redoes only what is missing. A new container gets the same mounts at its create
//! ([`mount_at_create`]).

use cohort_proto::agent::{DatasetMount, ImportDataset, InstanceDatasets, PruneDatasets};
use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::payload::{Job, OfCourse};
use crate::agent_client::{AgentError, NodeAgent};
use crate::app::state::Controller;
use crate::courses::data::{dataset_volume, may_write_course_data};
use crate::db::models::course::Course;
use crate::db::models::course_dataset::CourseDataset;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::user::User;
use crate::error::ActionError;

/// What instance `instance` mounts: its course's datasets read-only, and read-write those of
/// the courses its owner may write to when it is their own course-less container.
fn mounts_of(
    conn: &mut PgConnection,
    instance: &Instance,
) -> Result<Vec<(String, String, bool)>, ActionError> {
    let mut mounts = Vec::new();
    if let Some(course) = instance.course_id {
        for (d, _) in CourseDataset::of_course(conn, course)? {
            mounts.push((d.name, d.sha256, false));
        }
        return Ok(mounts);
    }
    let owner = User::find(conn, instance.owner_id)?;
    for course in Course::list(conn, Some(owner.id))? {
        if !may_write_course_data(conn, &owner, &course)? {
            continue;
        }
        for (d, _) in CourseDataset::of_course(conn, course.id)? {
            if !mounts.iter().any(|(name, _, _)| *name == d.name) {
                mounts.push((d.name, d.sha256, true));
            }
        }
    }
    Ok(mounts)
}

/// Makes the volumes of `mounts` on the node, then mounts them in `instance`.
async fn apply(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    instance: &str,
    mounts: &[(String, String, bool)],
) -> Result<(), AgentError> {
    for (_, sha256, _) in mounts {
        agent
            .import_dataset(ImportDataset {
                url: format!("{}/api/v1/data/{sha256}/tarball", ctl.config.public_url()),
                sha256: sha256.clone(),
                volume: dataset_volume(sha256),
            })
            .await?;
    }
    let request = InstanceDatasets {
        mounts: mounts
            .iter()
            .map(|(name, sha256, writable)| DatasetMount {
                name: name.clone(),
                volume: dataset_volume(sha256),
                writable: *writable,
            })
            .collect(),
    };
    tracing::debug!(node = %node.name, instance, "mounting datasets");
    agent.set_datasets(instance.to_string(), request).await
}

/// At a create: the new container gets its datasets before it is reported made.
pub async fn mount_at_create(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    instance: &Instance,
) -> Result<(), ActionError> {
    let row = instance.clone();
    let mounts = ctl.db(move |conn| mounts_of(conn, &row)).await?;
    if mounts.is_empty() {
        return Ok(());
    }
    apply(ctl, node, agent, &instance.name, &mounts)
        .await
        .map_err(ActionError::on_node(&node.name))
}

/// Runs one item: its `target` is the node.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Job::SyncCourseData(OfCourse { course }) = job else {
        return Ok(StepOutcome::Failed(
            "a sync_data step belongs to a sync_course_data operation".into(),
        ));
    };
    let (item_id, node_name, code) = (item.id, item.target.clone(), course.clone());
    let found = ctl
        .db(move |conn| {
            OperationItem::start_attempt(conn, item_id)?;
            Ok((
                Course::by_code(conn, &code)?,
                Node::by_name(conn, &node_name)?,
            ))
        })
        .await?;
    let (Some(course), Some(node)) = found else {
        return Ok(StepOutcome::Cancelled(
            "the course or the node is gone".into(),
        ));
    };
    let (node, agent) = ctl.agent_by_node_id(node.id).await?;
    let (course_id, node_id) = (course.id, node.id);
    let plan = ctl
        .db(move |conn| {
            let mut plan = Vec::new();
            for m in CourseDataset::mounters(conn, course_id, node_id)? {
                let Some(instance) = Instance::by_name(conn, &m.instance)? else {
                    continue;
                };
                plan.push((instance.name.clone(), mounts_of(conn, &instance)?));
            }
            Ok(plan)
        })
        .await?;
    for (instance, mounts) in &plan {
        match apply(ctl, &node, agent.as_ref(), instance, mounts).await {
            // Not made yet: its create mounts the datasets.
            Err(AgentError::Status { status: 404, .. }) => {}
            other => other.map_err(ActionError::on_node(&node.name))?,
        }
    }
    let keep = ctl
        .db(move |conn| Ok(CourseDataset::versions_on_node(conn, node_id)?))
        .await?;
    agent
        .prune_datasets(PruneDatasets {
            keep: keep.iter().map(|sha| dataset_volume(sha)).collect(),
        })
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(StepOutcome::Done)
}
