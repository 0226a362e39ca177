//! Batch jobs (issue 44): `POST /api/v1/jobs` runs a command in the student's own container, as
//! the student, once its turn comes (with a GPU lease when it asks for GPUs); `GET /api/v1/jobs`
//! lists them, `GET /api/v1/jobs/{id}` shows one with its place and why it waits,
//! `GET /api/v1/jobs/{id}/log` reads its output, `POST /api/v1/jobs/{id}/cancel` ends it and
//! `PUT /api/v1/jobs/{id}/priority` moves it up a course's queue.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::courses::GpuHours;

/// Where a job stands.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its turn (and, with GPUs, for its lease).
    Queued,
    /// Its lease is granted or its turn came: being started in the container.
    Starting,
    /// Its command runs in the container.
    Running,
    /// Its node does not answer: not known until it does.
    Unknown,
    /// Ended with exit code 0.
    Succeeded,
    /// Ended with another exit code, could not start, or was lost with its container.
    Failed,
    /// Cancelled by its owner, the course's staff or an admin.
    Cancelled,
    /// Stopped at its time limit, or by its container's stop.
    Killed,
}

crate::named_enum!(JobState, "a job state" {
    Queued => "queued",
    Starting => "starting",
    Running => "running",
    Unknown => "unknown",
    Succeeded => "succeeded",
    Failed => "failed",
    Cancelled => "cancelled",
    Killed => "killed",
});

impl JobState {
    /// True once the job is over.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Succeeded | JobState::Failed | JobState::Cancelled | JobState::Killed
        )
    }
}

/// `POST /api/v1/jobs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    /// The student's own container.
    pub instance: String,
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
    /// GPUs for the job: 0 (default) runs it at once without one; 1 or more waits for a GPU
    /// lease on the container's node (at most the course's GPUs per container).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// Its time limit; default 2 (or the course's `gpu_lease_max_hours`, when lower), at most that
    /// maximum for a GPU job and a week for a CPU job.
    #[serde(default)]
    pub hours: Option<GpuHours>,
    /// Where it runs: a directory in the student's home (relative to it, or absolute under
    /// it); default the home.
    #[serde(default)]
    pub workdir: Option<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
}

/// `PUT /api/v1/jobs/{id}/priority`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobPriority {
    /// Higher goes first in its course's queue and its node's GPU queue; default 0, from -100
    /// to 100.
    pub priority: i32,
}

/// A job as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub id: i64,
    pub instance: String,
    pub username: String,
    #[serde(default)]
    pub course: Option<String>,
    pub command: Vec<String>,
    #[serde(default)]
    pub workdir: Option<String>,
    pub gpus: u32,
    pub hours: GpuHours,
    pub priority: i32,
    pub state: JobState,
    pub submitted_at: DateTime<Utc>,
    #[serde(default)]
    pub started_at: Option<DateTime<Utc>>,
    /// When its time limit stops it.
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Why it ended (or why it is unknown).
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub node: Option<String>,
    /// The leased GPU's uuid.
    #[serde(default)]
    pub gpu: Option<String>,
    /// GPUs times the seconds it ran with them.
    pub gpu_seconds: f64,
    /// Queued: 1 for the next of its course's queue on its node.
    #[serde(default)]
    pub place: Option<u32>,
    /// Queued: why it waits.
    #[serde(default)]
    pub why: Option<String>,
    /// The log's path inside the container.
    pub log_path: String,
}

/// `GET /api/v1/jobs/{id}/log?offset=N`: the log's bytes from `offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobLog {
    pub offset: u64,
    /// Where the next read starts.
    pub next_offset: u64,
    /// The bytes read, as UTF-8 (invalid sequences replaced).
    pub text: String,
    /// The job is over: nothing more will be written.
    pub done: bool,
}
