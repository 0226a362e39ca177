//! `/api/v1/orphans` (admin): containers found in a node's LXD project without a record in
//! Cohort. Their SSH ports are never handed out again while they are listed; an admin adopts
//! one (it becomes an instance of an owner) or deletes it.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Orphan {
    pub node: String,
    pub name: String,
    /// `running`, `stopped` or `error`, as last seen.
    pub status: String,
    /// The node port its SSH proxy listens on, if it has one.
    pub ssh_port: Option<u16>,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

/// `POST /api/v1/orphans/{node}/{name}/adopt`: the container becomes an instance of `owner`,
/// made from catalog image `image`, on its node and port, with the limits LXD holds for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdoptOrphan {
    pub owner: String,
    pub image: String,
}
