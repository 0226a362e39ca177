//! The `set_home_snapshots` step of a course's `set_course_home_snapshots` operation: the agent
//! sets the course's snapshot schedule and expiry on the container's home volume, where the
//! daemon itself makes and prunes the snapshots from then on; and the `restore_home` step of a
//! `restore_home` operation: the home volume back to one of its snapshots; and the
//! `restore_home_path` step: one path of a snapshot copied into the running home.

use cohort_proto::agent::{HomeSnapshotSchedule, RestoreHome, RestoreHomePath};

use super::outcome::StepOutcome;
use super::payload::{self, Job};
use crate::agent_client::{AgentError, NodeAgent};
use crate::app::state::Controller;
use crate::db::models::course_home_snapshots::CourseHomeSnapshots;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::error::ActionError;
use crate::placement::home_size::home_volume;

/// The step: reads the course's schedule when it runs (a later change wins, whichever
/// operation runs last), so a retried or late step never sets an old one. A home not made
/// (yet) takes the schedule with its container's create: nothing to do.
pub async fn run(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let Some(course_id) = instance.course_id else {
        return Ok(StepOutcome::Done);
    };
    let schedule = ctl
        .db(move |conn| Ok(CourseHomeSnapshots::of(conn, course_id)?))
        .await?;
    match agent
        .set_home_snapshots(
            home_volume(&instance.name),
            HomeSnapshotSchedule { schedule },
        )
        .await
    {
        Ok(()) | Err(AgentError::Status { status: 404, .. }) => Ok(StepOutcome::Done),
        Err(source) => Err(ActionError::on_node(&node.name)(source)),
    }
}

/// The step: has the agent restore the home (stopping and starting a running container around
/// it). Restoring the same snapshot again gives the same home, so a retried step is harmless.
/// A snapshot that is not there (expired meanwhile) fails the item with the agent's reason.
pub async fn restore(
    job: &Job,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let Job::RestoreHome(payload::RestoreHome { snapshot }) = job else {
        return Ok(StepOutcome::Failed(
            "a restore_home item outside a restore_home operation".into(),
        ));
    };
    let request = RestoreHome {
        volume: home_volume(&instance.name),
        snapshot: snapshot.clone(),
    };
    match agent.restore_home(instance.name.clone(), request).await {
        Ok(()) => Ok(StepOutcome::Done),
        Err(AgentError::Status {
            status: 404,
            message,
            ..
        }) => Ok(StepOutcome::Failed(message)),
        Err(source) => Err(ActionError::on_node(&node.name)(source)),
    }
}

/// The step of a `restore_home_path` operation: has the agent copy the path out of the snapshot
/// into the running container's `~/restored/<snapshot>/`. A copy again replaces the first, so
/// a retried step is harmless. What the agent refuses (a 4xx: the snapshot expired meanwhile,
/// the container stopped) fails the item with its reason; anything else is retried.
pub async fn restore_path(
    job: &Job,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let Job::RestoreHomePath(payload::RestoreHomePath { snapshot, path }) = job else {
        return Ok(StepOutcome::Failed(
            "a restore_home_path item outside a restore_home_path operation".into(),
        ));
    };
    let request = RestoreHomePath {
        volume: home_volume(&instance.name),
        snapshot: snapshot.clone(),
        path: path.clone(),
        check: false,
    };
    agent
        .restore_home_path(instance.name.clone(), request)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(StepOutcome::Done)
}
