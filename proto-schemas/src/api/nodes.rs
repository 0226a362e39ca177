//! Nodes: `GET /api/v1/nodes`, `GET|DELETE /api/v1/nodes/{name}`, `POST /api/v1/nodes/tokens`,
//! `POST /api/v1/nodes/{name}/cordon|evacuate|restore` (admin only).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a node stands for placement.
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// Answering the poller; takes placements.
    Online,
    /// Missed the offline threshold; its instances show `unknown`, nothing is placed on it.
    Offline,
    /// Taken out of placement by an admin; its instances keep running.
    Cordoned,
    /// Its instances are being stopped or moved away.
    Evacuating,
}

crate::named_enum!(NodeState, "a node state" {
    Online => "online",
    Offline => "offline",
    Cordoned => "cordoned",
    Evacuating => "evacuating",
});

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub agent_url: String,
    /// Host students use for SSH to this node's containers.
    pub ssh_host: String,
    pub ssh_port_first: u16,
    pub ssh_port_last: u16,
    pub state: NodeState,
    pub cores: u32,
    pub memory_bytes: u64,
    pub disk_total_bytes: u64,
    pub disk_free_bytes: u64,
    /// The daemon the node runs, `lxd` or `incus`; with `lxd_version`, its version.
    pub daemon: Option<String>,
    pub lxd_version: Option<String>,
    pub storage_driver: Option<String>,
    pub nvidia_runtime: bool,
    pub gpus: u32,
    pub instances: u32,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub enrolled_at: DateTime<Utc>,
    /// When the node's certificate expires (renewed at two thirds of its life); none when every
    /// certificate of the node is revoked or expired (the node must join again).
    #[serde(default)]
    pub certificate_expires_at: Option<DateTime<Utc>>,
}

/// `POST /api/v1/nodes/tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJoinToken {
    /// Name the node will enroll under (LXD instance-name rules).
    pub node_name: String,
    /// Lifetime in seconds; default 3600, at most 7 days.
    #[serde(default)]
    pub ttl_seconds: Option<u32>,
    /// Host names or IP addresses the controller reaches the node's agent at (at most 16). With
    /// the node name they are the only names its certificate carries, and the agent URL it
    /// enrolls with must use one of them; default none (the node name alone).
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// The answer to [`CreateJoinToken`]; `token` is shown once and is what `cohort-agent join` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinTokenIssued {
    /// Base64 (standard alphabet) of [`crate::enroll::JoinToken`] JSON.
    pub token: String,
    pub node_name: String,
    pub expires_at: DateTime<Utc>,
}

/// What evacuation does with the node's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EvacuatePolicy {
    /// Stop them where they are (default; homes and ports stay on the node).
    #[default]
    Stop,
    /// Move them, root disk and home, to other nodes, with a new SSH port there (`restore`
    /// brings them back).
    Move,
}

/// `POST /api/v1/nodes/{name}/evacuate` (body optional) -> 202 with an operation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvacuateNode {
    #[serde(default)]
    pub policy: EvacuatePolicy,
}
