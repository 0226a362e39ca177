//! `GET /api/v1/usage`: GPU time from the hourly accounting (issue 43), summed per student,
//! course, node or day. A student sees their own, an instructor their courses' (and their own),
//! an admin everything; asking for more is a 403.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Query of `GET /api/v1/usage`; every filter is optional and they combine with AND.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// Only this course (its code).
    #[serde(default)]
    pub course: Option<String>,
    /// Only this user's instances (a username).
    #[serde(default)]
    pub user: Option<String>,
    /// From this day (`YYYY-MM-DD`, UTC) or time (RFC 3339), rounded down to its hour.
    #[serde(default)]
    pub since: Option<String>,
    /// Before this time (RFC 3339), or up to the end of this day (`YYYY-MM-DD`, UTC).
    #[serde(default)]
    pub until: Option<String>,
    /// How rows are grouped: `student` (default), `course`, `node` or `day`.
    #[serde(default)]
    pub by: Option<String>,
}

/// The answer: one row per group, in key order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageReport {
    /// The grouping the rows use.
    pub by: String,
    pub rows: Vec<UsageRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageRow {
    /// The username, course code, node name or day (`YYYY-MM-DD`); empty for no course.
    pub key: String,
    /// GPU-seconds a GPU was held (attached, or running its processes), one per GPU.
    pub allocated_seconds: f64,
    /// GPU-seconds weighted by utilisation.
    pub busy_seconds: f64,
}
