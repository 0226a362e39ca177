//! `/api/v1/courses`: a course, its roster, provisioning one container per student, the SSH
//! endpoints export and teardown.
//!
//! | route                                              | body / answer                    |
//! |----------------------------------------------------|----------------------------------|
//! | `POST /courses`                                    | [`CreateCourse`] -> [`Course`]   |
//! | `GET /courses`, `GET /courses/{code}`              | [`Course`]                       |
//! | `PUT /courses/{code}/quota` (admin)                | [`CourseQuota`] -> [`Course`]    |
//! | `PUT /courses/{code}/limits`                       | [`CourseLimits`] -> [`CourseLimitsChange`] |
//! | `PUT /courses/{code}/home/snapshots`               | [`CourseHomeSnapshots`] -> [`CourseHomeSnapshotsChange`] |
//! | `POST /courses/{code}/roster`                      | CSV or JSON roster -> [`RosterReport`] |
//! | `GET /courses/{code}/students`                     | `Vec<Student>`                   |
//! | `DELETE /courses/{code}/students/{username}`       | operation (deletes the container)|
//! | `POST /courses/{code}/students/{username}/{action}`| [`StudentAction`] -> operation   |
//! | `POST /courses/{code}/students/{username}/password` | [`IssuedPassword`] (shown once) |
//! | `GET /courses/{code}/students/{username}/snapshots` | `Vec<Snapshot>`                 |
//! | `POST /courses/{code}/students/{username}/snapshots` | [`StudentSnapshot`] -> `Snapshot` |
//! | `POST /courses/{code}/students/{username}/snapshots/{snapshot}/restore` | 204         |
//! | `POST /courses/{code}/provision`                   | operation, one item per student  |
//! | `GET /courses/{code}/endpoints?format=csv|json|ssh-config|known-hosts` | text        |
//! | `POST /courses/{code}/teardown`                    | [`Teardown`] -> operation        |

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::agent::{Egress, NetworkPolicy};

/// Where a course stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[serde(rename_all = "snake_case")]
pub enum CourseState {
    /// Its students' containers are provisioned and kept.
    Active,
    /// Past its end date: the reclaimer stopped its containers.
    Ended,
    /// Torn down with its containers deleted; provisioning it again brings them back.
    TornDown,
}

crate::named_enum!(CourseState, "a course state" {
    Active => "active",
    Ended => "ended",
    TornDown => "torn_down",
});

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCourse {
    /// Course code, also the prefix of its instance names (LXD name rules, at most 40 chars).
    pub code: String,
    pub title: String,
    /// Template image alias or fingerprint.
    pub image: String,
    /// Per student; default 1 core, 1024 MiB, 10 GiB, no GPU.
    #[serde(default)]
    pub cpu: Option<u32>,
    #[serde(default)]
    pub memory_mib: Option<u64>,
    #[serde(default)]
    pub disk_gib: Option<u64>,
    #[serde(default)]
    pub gpus: Option<u32>,
    #[serde(default)]
    pub gpu_model: Option<String>,
    /// 1 = each student's GPU is theirs alone; N > 1 = at most N containers share one GPU (and
    /// never more than its `share_limit`). Default 1.
    #[serde(default)]
    pub gpu_share: Option<u32>,
    /// Most processes in each student's container (`limits.processes`, 64 to 1000000);
    /// default the controller's `COHORT_DEFAULT_PROCESSES`.
    #[serde(default)]
    pub processes: Option<u32>,
    /// Size of each student's home volume in MiB (32 to 16777216); default the controller's
    /// `COHORT_DEFAULT_HOME_GIB`. A student who fills it gets ENOSPC in their own container.
    #[serde(default)]
    pub home_mib: Option<u64>,
    /// `off` (default), `daily` or `hourly`: the daemon snapshots each student's home volume
    /// on that schedule.
    #[serde(default)]
    pub home_snapshots: Option<String>,
    /// How many scheduled snapshots of each home are kept, 1 to 100 (default 7).
    #[serde(default)]
    pub home_snapshots_keep: Option<u32>,
    /// Days each student's archived home is kept once the course is archived, 1 to 3650;
    /// default the controller's `COHORT_ARCHIVE_DAYS` (90).
    #[serde(default)]
    pub archive_days: Option<u32>,
    /// Sharing GPUs (`gpu_share` > 1): the most GPU memory each process in a student's
    /// container may allocate, in MiB (64 to 1048576); default the card's memory over
    /// `gpu_share`. Enforced by the cap library the agent installs (docs/gpus.md).
    #[serde(default)]
    pub gpu_memory_mib: Option<u64>,
    /// `YYYY-MM-DD` or RFC 3339.
    #[serde(default)]
    pub starts: Option<String>,
    #[serde(default)]
    pub ends: Option<String>,
    /// Admins may create a course for an instructor; default the caller.
    #[serde(default)]
    pub instructor: Option<String>,
    /// Stop a student's container after this many minutes without GPU use; default never.
    #[serde(default)]
    pub idle_gpu_minutes: Option<u32>,
    /// Stop a student's container after it has run this many minutes; default never.
    #[serde(default)]
    pub max_runtime_minutes: Option<u32>,
    /// What `idle_gpu_minutes` does: `stop` the container (default), or `detach` its GPUs and
    /// leave it running.
    #[serde(default)]
    pub idle_action: Option<String>,
    /// The students' network: egress `open` (default), `none` or `{"allow": [CIDR[:PORT]...]}`,
    /// and `ssh_from` CIDRs (default anywhere).
    #[serde(default)]
    pub network: Option<NetworkPolicy>,
    /// GPU hours each student may hold a GPU per `budget_period` (more than 0, at most 10000;
    /// decimals allowed); default no budget. At 80 % the student is told, at 100 % their GPU is
    /// detached (the container keeps running).
    #[serde(default)]
    pub gpu_hours_per_student: Option<GpuHours>,
    /// `week` (from Monday 00:00 UTC), `month` or `course` (the whole course); default `week`.
    #[serde(default)]
    pub budget_period: Option<String>,
    /// Minutes between the warning a student gets and the idle stop, idle GPU detach or
    /// longest-run stop it announces, 0 to 1440; default 10.
    #[serde(default)]
    pub warn_minutes: Option<u32>,
}

/// Hours of GPU time, decimals allowed (`0.5`). Always finite: the controller refuses others.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize, JsonSchema)]
pub struct GpuHours(pub f64);

// The controller admits finite values only, for which equality is total.
impl Eq for GpuHours {}

/// `PUT /courses/{code}/budget` (its instructor, staff or an admin): the course's GPU budget;
/// `gpu_hours_per_student: null` removes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseBudget {
    #[serde(default)]
    pub gpu_hours_per_student: Option<GpuHours>,
    /// `week`, `month` or `course`; default `week`.
    #[serde(default)]
    pub budget_period: Option<String>,
}

/// `POST /courses/{code}/grants` (its instructor, staff or an admin): extra GPU hours for one
/// student in the current budget period, audited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantHours {
    pub username: String,
    /// More than 0, at most 10000.
    pub hours: GpuHours,
}

/// One student's GPU budget in the current period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StudentBudget {
    pub course: String,
    pub username: String,
    /// `week`, `month` or `course`.
    pub period: String,
    pub period_start: DateTime<Utc>,
    /// The course's hours per student.
    pub budget_hours: GpuHours,
    /// Granted on top in this period.
    pub granted_hours: GpuHours,
    /// Allocated GPU hours this period.
    pub used_hours: GpuHours,
    /// When the student was told of the 80 % mark this period.
    #[serde(default)]
    pub warned_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Course {
    pub code: String,
    pub title: String,
    pub instructor: String,
    pub image: Option<String>,
    pub cpu: u32,
    pub memory_mib: u64,
    pub disk_gib: u64,
    pub gpus: u32,
    pub gpu_model: Option<String>,
    /// `exclusive` or `shared`.
    pub gpu_share: String,
    /// Shared: at most this many containers on one GPU (the course's `gpu_share`), under each
    /// GPU's own `share_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_share_count: Option<u32>,
    /// `limits.processes` of each student's container, when the course sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// Size of each student's home volume in MiB, when the course sets it (otherwise the
    /// controller's `COHORT_DEFAULT_HOME_GIB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_mib: Option<u64>,
    /// `off`, `daily` or `hourly`: the daemon's snapshots of each student's home.
    #[serde(default = "default_home_snapshots")]
    pub home_snapshots: String,
    /// How many scheduled snapshots of each home are kept (when `home_snapshots` is not off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_snapshots_keep: Option<u32>,
    /// Days each archived home of the course is kept (`course archive`, `teardown --archive`);
    /// absent for a course made before the setting, which follows the controller's
    /// `COHORT_ARCHIVE_DAYS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archive_days: Option<u32>,
    /// Sharing: each student's GPU memory cap in MiB, when the course sets it (otherwise the
    /// card's memory over `gpu_share_count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_mib: Option<u64>,
    /// Whether the course's instructors may open its students' JupyterLab through the portal
    /// (default false: the student only).
    #[serde(default)]
    pub jupyter_instructors: bool,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub state: CourseState,
    pub students: u32,
    pub quota: CourseQuota,
    /// Minutes without GPU use after which a container is stopped; `None` = never.
    #[serde(default)]
    pub idle_gpu_minutes: Option<u32>,
    /// Minutes of running after which a container is stopped; `None` = never.
    #[serde(default)]
    pub max_runtime_minutes: Option<u32>,
    /// `stop` or `detach` (GPUs taken, container left running) when idle.
    #[serde(default = "default_idle_action")]
    pub idle_action: String,
    /// What the students' containers may reach and who may reach their SSH.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// Other instructors and teaching assistants holding its instructor's rights (all but
    /// deleting the course and its quota), by username.
    #[serde(default)]
    pub staff: Vec<String>,
    /// GPU hours per student and `budget_period`, counted on allocated GPU time; absent = no
    /// budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hours_per_student: Option<GpuHours>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_period: Option<String>,
    /// Minutes of warning before a reclaim (idle stop, idle GPU detach, longest run).
    #[serde(default = "default_warn_minutes")]
    pub warn_minutes: u32,
    /// `pinned` (a GPU is the container's from its creation) or `on-demand` (containers run
    /// without one; a student asks for a GPU lease: `POST /instances/{name}/gpu-lease`).
    #[serde(default = "default_gpu_mode")]
    pub gpu_mode: String,
    /// The longest lease a student may ask for in an on-demand course, in hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_lease_max_hours: Option<GpuHours>,
}

fn default_gpu_mode() -> String {
    "pinned".into()
}

/// `PUT /courses/{code}/gpu-mode` (its instructor, staff or an admin): how the course's
/// containers get GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseGpuMode {
    /// `pinned` or `on-demand`.
    pub gpu_mode: String,
    /// On demand: the longest lease, more than 0 and at most 168 hours; default 2.
    #[serde(default)]
    pub gpu_lease_max_hours: Option<GpuHours>,
}

fn default_warn_minutes() -> u32 {
    10
}

fn default_home_snapshots() -> String {
    "off".into()
}

fn default_idle_action() -> String {
    "stop".into()
}

/// Admin-set limits; `None` means no limit. Provisioning past them is refused before anything
/// is created.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseQuota {
    #[serde(default)]
    pub max_students: Option<u32>,
    #[serde(default)]
    pub max_gpus: Option<u32>,
    #[serde(default)]
    pub max_memory_mib: Option<u64>,
}

/// What a roster import did. Students missing from the new roster are reported, never removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RosterReport {
    pub added: Vec<String>,
    pub already_enrolled: Vec<String>,
    /// Enrolled but absent from this roster: remove them explicitly if meant.
    pub not_in_roster: Vec<String>,
    /// Students this roster created without a key, who got a generated password (see the
    /// endpoints export).
    pub passwords_generated: Vec<String>,
    /// Students who already had an account: enrolled with their own keys and password, which a
    /// roster never changes (only the person or an admin does).
    pub existing_accounts: Vec<ExistingAccount>,
}

/// A roster row that named an account which already existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExistingAccount {
    pub username: String,
    /// The roster gave a key that this account does not have; it was not added.
    pub roster_key_ignored: bool,
    /// The account has neither a key nor a password: the person (or an admin) must add one
    /// before they can log in.
    pub without_credentials: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Student {
    pub username: String,
    pub name: Option<String>,
    pub email: Option<String>,
    pub instance: Option<String>,
    pub node: Option<String>,
    pub ssh_port: Option<u16>,
    pub state: Option<String>,
    /// Why the student's container waits, while it is queued: the reason placement keeps on it
    /// ("needs 10 GiB of disk; largest free on any node: 3 GiB").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StudentAction {
    /// Re-create the container from the template (the home volume is kept).
    Reset,
    Start,
    Stop,
    Restart,
}

/// A new generated password for a student, shown in this answer only; the controller keeps its
/// crypt(3) hash. Issued only to an account this course's roster created whose owner never set
/// credentials of their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IssuedPassword {
    pub username: String,
    pub password: String,
}

/// An instructor's snapshot of one student's container.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StudentSnapshot {
    /// Snapshot name (LXD name rules); default `snap-<UTC YYYYMMDD-HHMMSS>`.
    #[serde(default)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Teardown {
    /// Delete the containers instead of stopping them.
    #[serde(default)]
    pub delete: bool,
    /// With `delete`: keep the students' home volumes.
    #[serde(default)]
    pub keep_homes: bool,
    /// First export every student's home into the archive store (as `course archive`, kept
    /// `COHORT_ARCHIVE_DAYS`); deleting, a home whose archive did not succeed is kept.
    #[serde(default)]
    pub archive: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointsQuery {
    /// `csv` (default), `json`, `ssh-config` or `known-hosts`.
    #[serde(default)]
    pub format: Option<String>,
}

/// `PUT /api/v1/courses/{code}/home`: the size of the students' home volumes, applied to each
/// home when its container is next created (a new student, a reset, a re-provision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseHome {
    /// MiB, 32 to 16777216; null: the controller's default.
    pub home_mib: Option<u64>,
}

/// `PUT /api/v1/courses/{code}/home/snapshots`: the schedule of the daemon's snapshots of each
/// student's home volume; a field left out keeps its value. Homes already made take it through
/// an operation with one item per container (its `set_home_snapshots` step).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseHomeSnapshots {
    /// `off`, `daily` or `hourly`.
    #[serde(default)]
    pub home_snapshots: Option<String>,
    /// 1 to 100.
    #[serde(default)]
    pub home_snapshots_keep: Option<u32>,
}

/// The answer to [`CourseHomeSnapshots`]: the course, and the operation taking the schedule to
/// the homes already made (none when there are none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseHomeSnapshotsChange {
    pub course: Course,
    #[serde(default)]
    pub operation: Option<crate::api::operations::Operation>,
}

/// `PUT /api/v1/courses/{code}/limits`: each student's CPU cores, memory and root disk, checked
/// as at the course's creation; a field left out keeps its value. Containers made after the
/// change take all three (a new student's, one still waiting for a node). Containers already
/// made get the new cores and memory live, through their agents, where their node has room
/// (an operation with one item per container); their root disk keeps the size it was made
/// with. The answer lists every container that keeps other limits, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseLimits {
    /// CPU cores, 1 to 256.
    #[serde(default)]
    pub cpu: Option<u32>,
    /// MiB, 64 to 1048576.
    #[serde(default)]
    pub memory_mib: Option<u64>,
    /// GiB of root disk, 1 to 16384, and at least the course image's size.
    #[serde(default)]
    pub disk_gib: Option<u64>,
}

/// The answer to `PUT /api/v1/courses/{code}/limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseLimitsChange {
    pub course: Course,
    /// The operation applying the new cores and memory to the containers already made, one
    /// item per container; absent when there is none to change.
    #[serde(default)]
    pub operation: Option<crate::api::operations::Operation>,
    /// The course's containers that keep other limits than the course's now, and why.
    pub kept: Vec<KeptLimits>,
    /// The same in words: what the change reaches and what it does not.
    pub note: String,
}

/// A container of the course with other limits than the course's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeptLimits {
    pub instance: String,
    pub owner: String,
    /// Its limits now.
    pub cpu: u32,
    pub memory_mib: u64,
    pub disk_gib: u64,
    /// Why it keeps them: its node has no room, is not online, the container is being made
    /// or changed, or (disk only) a root disk keeps the size it was made with.
    pub reason: String,
}

/// `PUT /api/v1/courses/{code}/jupyter`: who besides the student may open a student's
/// JupyterLab through the portal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseJupyter {
    /// The course's instructors too (default false: the student only).
    pub instructors: bool,
}

/// `POST /api/v1/courses/{code}/copy`: next term's course, made from this one's settings
/// (image, limits, network policy, GPU settings, reclaim, home size, staff) with no students.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyCourse {
    /// The new course's code.
    pub code: String,
    /// Its title; the old course's when left out.
    #[serde(default)]
    pub title: Option<String>,
}

/// `PUT /api/v1/courses/{code}/archive-days`: days each student's archived home is kept, for
/// the archives made from now on (1 to 3650).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseArchiveDays {
    pub archive_days: u32,
}

/// `PUT /api/v1/courses/{code}/reclaim-warning`: minutes between a student's warning and the
/// reclaim it announces (0 to 1440; 0: no warning).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseReclaimWarning {
    pub warn_minutes: u32,
}

/// `PUT /api/v1/courses/{code}/job-limits`: each student's batch jobs at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseJobLimits {
    /// Jobs running at once, 1 to 100; default 1.
    pub max_running: i32,
    /// Jobs waiting at once, 0 to 1000; default 5.
    pub max_queued: i32,
}
