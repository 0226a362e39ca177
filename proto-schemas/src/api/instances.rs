//! Instances: `GET|POST /api/v1/instances`, `GET|DELETE /api/v1/instances/{name}`,
//! `PATCH /api/v1/instances/{name}` (live config and devices), `GET /api/v1/instances/{name}/config`,
//! `PUT /api/v1/instances/{name}/state`, `POST /api/v1/instances/{name}/exec`,
//! `GET|PUT /api/v1/instances/{name}/files?path=P` (raw bytes; `X-Cohort-Mode/Uid/Gid`),
//! `GET|POST /api/v1/instances/{name}/snapshots`,
//! `POST /api/v1/instances/{name}/snapshots/{snapshot}/restore`,
//! `DELETE /api/v1/instances/{name}/snapshots/{snapshot}`,
//! `POST /api/v1/instances/{name}/move` (admin).
//! Create, delete and state changes answer 202 with an operation; the rest are proxied to the
//! node's agent and answer with its types. An exec's result and a pulled file stream through
//! the controller; more than its limits (`COHORT_EXEC_OUTPUT_LIMIT_MIB`,
//! `COHORT_FILE_LIMIT_MIB`) is a 413 `too_large` naming `stdout`, `stderr` or `path`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::agent::HomeSnapshot;
pub use crate::agent::{CreateSnapshot, ExecRequest, ExecResult, Limits, Snapshot, StateAction};

/// `POST /api/v1/instances/{name}/home/restore`: the home volume back to `snapshot`, whole, as
/// an operation (the container is stopped around it when running, and started again); or,
/// with `path`, that one file or directory of the snapshot copied into
/// `~/restored/<snapshot>/<path>` while the container keeps running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreHomeRequest {
    pub snapshot: String,
    /// A path relative to the home (`notes/week3.md`, `project`): restore only it, as a copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

// Stored by name in `instances.gpu_share` and `courses.gpu_share`.
/// How a GPU is held.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GpuShare {
    /// A GPU whose `share_limit` is 1, or a MIG instance.
    Exclusive,
    /// One slot of a GPU with `share_limit` > 1 (default).
    #[default]
    Shared,
}

crate::named_enum!(GpuShare, "a GPU share" {
    Exclusive => "exclusive",
    Shared => "shared",
});

// Stored by name in `instances.strategy`.
/// How placement scores the nodes that fit.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PlacementStrategy {
    /// The node with the most free capacity (default).
    #[default]
    Spread,
    /// The node with the least free capacity that still fits.
    Pack,
}

crate::named_enum!(PlacementStrategy, "a placement strategy" {
    Spread => "spread",
    Pack => "pack",
});

/// `POST /api/v1/instances` -> 202 with the create operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInstance {
    /// LXD's rules: 1-63 of a-z, 0-9 and '-', no '-' at either end, not all digits.
    pub name: String,
    /// Image alias or fingerprint from the catalog.
    pub image: String,
    /// Default: 1 core, 1024 MiB, 10 GiB.
    #[serde(default)]
    pub limits: Option<Limits>,
    /// Number of GPUs (default 0).
    #[serde(default)]
    pub gpus: u32,
    /// GPU model name as NVML reports it, e.g. `NVIDIA A100-SXM4-40GB`; any when absent.
    #[serde(default)]
    pub gpu_model: Option<String>,
    #[serde(default)]
    pub gpu_share: GpuShare,
    /// Extra LXD config; only `user.*` and a short allow-list (`boot.autostart.priority`,
    /// `snapshots.schedule`, `snapshots.expiry`, `snapshots.pattern`) pass. `boot.autostart`
    /// is Cohort's: it follows the desired state.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Owner's username; admins and instructors may create for someone else. Default: caller.
    #[serde(default)]
    pub owner: Option<String>,
    /// Pin to this node instead of placing.
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub strategy: PlacementStrategy,
    /// Queue priority when nothing fits; higher places first (default 0; students cannot raise it).
    #[serde(default)]
    pub priority: i32,
    /// Queue the request when nothing fits instead of refusing it (default true).
    #[serde(default = "default_true")]
    pub queue: bool,
    /// Start it once created (default true).
    #[serde(default = "default_true")]
    pub start: bool,
}

fn default_true() -> bool {
    true
}

/// What the controller wants an instance to be.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DesiredState {
    Running,
    Stopped,
    Deleted,
}

crate::named_enum!(DesiredState, "a desired instance state" {
    Running => "running",
    Stopped => "stopped",
    Deleted => "deleted",
});

/// What the controller last saw.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObservedState {
    /// Waiting for capacity; not placed on any node.
    Queued,
    /// Placed; being created on the node.
    Pending,
    Running,
    Stopped,
    /// Its node is offline or the agent no longer reports it.
    Unknown,
    /// Its node answers but its LXD no longer has the container (deleted behind Cohort's back).
    Missing,
    Error,
}

crate::named_enum!(ObservedState, "an observed instance state" {
    Queued => "queued",
    Pending => "pending",
    Running => "running",
    Stopped => "stopped",
    Unknown => "unknown",
    Missing => "missing",
    Error => "error",
});

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub name: String,
    pub owner: String,
    pub course: Option<String>,
    /// Absent while queued.
    pub node: Option<String>,
    pub image: String,
    pub desired_state: DesiredState,
    pub observed_state: ObservedState,
    pub limits: Limits,
    pub gpus: Vec<InstanceGpu>,
    pub ssh_host: Option<String>,
    pub ssh_port: Option<u16>,
    /// The container's SSH host key (`ssh-ed25519 AAAA...`), made by its agent before the first
    /// boot: `[ssh_host]:ssh_port` followed by it is the student's `known_hosts` line.
    #[serde(default)]
    pub ssh_host_key: Option<String>,
    /// Queue priority (meaningful while queued).
    pub priority: i32,
    pub config: BTreeMap<String, String>,
    /// The last error the controller met making it what is desired.
    pub error: Option<String>,
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub created_at: DateTime<Utc>,
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub last_seen_at: Option<DateTime<Utc>>,
    /// GPU use of the instance's processes at the node's last poll, per GPU (found by mapping
    /// the GPU's compute processes to containers through their cgroups).
    #[serde(default)]
    pub gpu_usage: Vec<InstanceGpuUsage>,
    /// Last poll that found a compute process of this instance on a GPU.
    #[serde(default)]
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub gpu_active_at: Option<DateTime<Utc>>,
    /// Why Cohort stopped the instance (idle GPU, longest run, course end), until it is started
    /// again.
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub stopped_at: Option<DateTime<Utc>>,
    /// Why Cohort took the instance's GPUs while leaving it running (a course whose
    /// `idle_action` is `detach`).
    #[serde(default)]
    pub gpu_detach_reason: Option<String>,
    #[serde(default)]
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub gpus_detached_at: Option<DateTime<Utc>>,
    /// Its description, as LXD's clients (`lxc`, pylxd) set and read it.
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGpuUsage {
    pub gpu: String,
    pub processes: u32,
    pub memory_used_bytes: u64,
    /// Fraction of the GPU's memory its processes hold (0 to 1).
    pub memory_share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGpu {
    pub uuid: String,
    pub model: String,
    pub slot: u32,
}

/// `PUT /api/v1/instances/{name}/state` -> 202 with an operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceStateChange {
    pub action: StateAction,
    #[serde(default)]
    pub force: bool,
    /// Seconds to wait for a clean shutdown (default 30).
    #[serde(default)]
    pub timeout_s: Option<u32>,
}

/// `POST /api/v1/instances/{name}/move` (admin) -> 202 with the move operation: the container
/// (stopped, its root disk and snapshots) and its home volume go to node `target`, which
/// allocates its SSH port there; a running one runs again there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveInstance {
    /// The node to move it to: online, not cordoned, not its node now, with room for it.
    pub target: String,
}

/// Query of `DELETE /api/v1/instances/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteInstanceQuery {
    /// Stop it first if running (like `lxc delete -f`).
    #[serde(default)]
    pub force: bool,
}

/// Query of the files routes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileQuery {
    /// Absolute path inside the container.
    pub path: String,
}

/// `PATCH /api/v1/instances/{name}` (owner, instructor of its course, admin; devices admin only)
/// -> [`LiveConfig`]. Config keys follow the create allow-list; devices are `disk` (a custom
/// volume of the node's pool, or a host path other than `/`) or `proxy` (listening on loopback or
/// the node's address). Cohort's own devices (root, `cohort-*`) cannot be added or removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateInstance {
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(default)]
    pub unset: Vec<String>,
    #[serde(default)]
    pub add_devices: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    pub remove_devices: Vec<String>,
}

/// The instance's configuration and devices as its node's LXD holds them now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveConfig {
    pub config: BTreeMap<String, String>,
    pub devices: BTreeMap<String, BTreeMap<String, String>>,
}

/// Query of `GET /api/v1/instances`: one page of the instances the caller may see, by name.
/// When more follow, the answer carries `Link: <...?limit=N&after=LAST>; rel="next"`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstancePage {
    /// Instances per page, 1 to 1000; default 1000.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only instances whose name sorts after this one (the last name of the previous page).
    #[serde(default)]
    pub after: Option<String>,
}

/// A reclaim announced to a container's student and not yet done
/// (`GET /api/v1/instances/{name}/reclaim-warnings`, `POST .../keep-working`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReclaimWarning {
    /// `idle` (no use for the course's `idle_gpu_minutes`), `max_runtime`, `lease_end` (a GPU
    /// lease of an on-demand course) or `budget` (the student's GPU budget runs out).
    pub reason: String,
    /// `stop` (the container) or `detach` (its GPUs; the container keeps running).
    pub action: String,
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub warned_at: DateTime<Utc>,
    /// When the reclaim is done, unless the reason stops holding first.
    #[serde(serialize_with = "crate::rfc3339::serialize")]
    pub due_at: DateTime<Utc>,
    /// When Keep working postponed it (once per warning).
    #[serde(default)]
    #[serde(serialize_with = "crate::rfc3339::option")]
    pub kept_at: Option<DateTime<Utc>>,
}
