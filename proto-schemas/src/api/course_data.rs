//! `/api/v1/courses/{code}/data`: a course's datasets. Each is a tarball stored once on the
//! controller under its SHA-256 and mounted at `/data/NAME` in the course's containers.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One dataset of a course: its current version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Dataset {
    pub course: String,
    /// Mounted at `/data/<name>`.
    pub name: String,
    /// SHA-256 (lowercase hex) of the tarball as pushed: the version.
    pub sha256: String,
    pub size_bytes: u64,
    pub pushed_by: Option<String>,
    pub pushed_at: DateTime<Utc>,
}

/// `POST /api/v1/courses/{code}/data?name=NAME`: the body is a tar stream. With `sha256`, the
/// controller refuses a body whose hash differs (nothing is kept).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushDatasetQuery {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The answer to a push: the dataset's new version and the operation bringing it to the nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetPushed {
    pub dataset: Dataset,
    /// Absent when no node holds the course's containers yet.
    pub operation: Option<crate::api::operations::Operation>,
}

/// `PUT /api/v1/courses/{code}/data-quota` (admin): the most the course's datasets may hold
/// together, in MiB; `null` for the controller's default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataQuota {
    pub quota_mib: Option<u64>,
}

/// A course's datasets and its quota.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DataUsage {
    pub quota_mib: u64,
    pub used_bytes: u64,
    pub datasets: Vec<Dataset>,
}

/// The answer to a removal: the operation taking the dataset off the nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetRemoved {
    /// Absent when no node holds the course's containers.
    pub operation: Option<crate::api::operations::Operation>,
}
