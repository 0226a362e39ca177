//! `/api/v1/courses/{code}/archive`: a course's archived homes. At a term's end every
//! student's home is exported into the controller's archive store as a `.tar.gz` of its files,
//! which the student (and the course's staff) download until it expires.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `POST /api/v1/courses/{code}/archive`: archive every student's home (an operation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArchiveCourse {
    /// Days the archives are kept; default the course's `archive_days`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
}

/// One student's archived home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CourseArchive {
    pub course: String,
    pub user: String,
    /// SHA-256 (lowercase hex) of the `.tar.gz` as stored and downloaded.
    pub sha256: String,
    pub size_bytes: u64,
    pub created_at: DateTime<Utc>,
    /// When the sweep deletes it.
    pub expires_at: DateTime<Utc>,
}
