//! `GET /api/v1/audit`: who did what to which object, when. Admins see everything, instructors
//! their courses and those courses' instances, students nothing (403).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Query of `GET /api/v1/audit`; every filter is optional and they combine with AND.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Only entries by this actor (a username, or `reclaim` for the reclaimer).
    #[serde(default)]
    pub actor: Option<String>,
    /// Only this action (`create`, `stop`, ...).
    #[serde(default)]
    pub action: Option<String>,
    /// Only objects of this kind (`instance`, `course`, `node`, ...).
    #[serde(default)]
    pub object_kind: Option<String>,
    /// Only this object (name or code).
    #[serde(default)]
    pub object: Option<String>,
    /// Only entries at or after this time (RFC 3339).
    #[serde(default)]
    pub since: Option<DateTime<Utc>>,
    /// Page size; default 100, at most 1000.
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only entries older than this id (the `next_before` of the previous page).
    #[serde(default)]
    pub before: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditEntry {
    pub id: i64,
    pub actor: String,
    pub action: String,
    pub object_kind: String,
    pub object: String,
    pub detail: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// One page, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    /// Pass as `before` for the next (older) page; absent on the last page.
    pub next_before: Option<i64>,
}
