//! GPUs on demand (issue 43): `POST /api/v1/instances/{name}/gpu-lease` asks for a GPU for a
//! container of an on-demand course, `DELETE` gives it back (or leaves the queue), `GET` shows
//! the lease or the place in the queue; `GET /api/v1/gpu-leases` lists the open ones.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::courses::GpuHours;

/// Where a request for a GPU stands.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// Waiting for a GPU on the container's node.
    Queued,
    /// The GPU is the container's until `ends_at`.
    Active,
    /// Given back: at `ends_at`, early, or taken (see `end_reason`).
    Ended,
    /// Left the queue before a GPU was granted.
    Cancelled,
}

crate::named_enum!(LeaseState, "a lease state" {
    Queued => "queued",
    Active => "active",
    Ended => "ended",
    Cancelled => "cancelled",
});

/// `POST /instances/{name}/gpu-lease`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuLeaseRequest {
    /// How long, more than 0 and at most the course's `gpu_lease_max_hours`; default 2 (or
    /// the maximum, when lower).
    #[serde(default)]
    pub hours: Option<GpuHours>,
}

/// A request for a GPU and its lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuLease {
    pub id: i64,
    pub instance: String,
    pub username: String,
    pub course: String,
    #[serde(default)]
    pub node: Option<String>,
    /// The GPU's uuid, once granted.
    #[serde(default)]
    pub gpu: Option<String>,
    pub hours: GpuHours,
    pub state: LeaseState,
    pub requested_at: DateTime<Utc>,
    #[serde(default)]
    pub granted_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub end_reason: Option<String>,
    /// Queued: 1 for the next to get a GPU on its node.
    #[serde(default)]
    pub place: Option<u32>,
    /// Queued: why it is at that place (fair share: the GPU hours each used this period).
    #[serde(default)]
    pub why: Option<String>,
    /// Queued: GPU hours the student used this period (what fair share orders by).
    #[serde(default)]
    pub used_hours: Option<GpuHours>,
}
