//! Images, the template catalog kept by the controller: `GET /api/v1/images`,
//! `POST /api/v1/images?alias=A[&description=D][&gpu_ready=true]` with the unified tarball as the
//! body (admin), `POST /api/v1/images/publish` (admin, instructor), `GET|DELETE
//! /api/v1/images/{fingerprint}`, and `GET /api/v1/images/{fingerprint}/tarball` (node
//! certificate or admin token), which agents import from, and
//! `POST /api/v1/images/{name}/distribute` (instructor, admin), which has every online node fetch
//! it ahead of a class.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Image {
    /// SHA-256 of the tarball, lowercase hex (LXD's fingerprint of a unified tarball).
    pub fingerprint: String,
    pub alias: String,
    pub description: String,
    pub gpu_ready: bool,
    pub size_bytes: u64,
    pub created_at: DateTime<Utc>,
    /// Nodes whose LXD holds it.
    pub nodes: Vec<String>,
    /// It runs JupyterLab for its student (`images/jupyter`, imported with `jupyter=true`): the
    /// portal offers JupyterLab in its containers.
    #[serde(default)]
    pub jupyter: bool,
}

/// Query of the import upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportImageQuery {
    pub alias: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Whether GPU courses and instances may use it; default the image's own
    /// `cohort.gpu_ready` property (metadata.yaml), else false.
    #[serde(default)]
    pub gpu_ready: Option<bool>,
    /// The image runs JupyterLab for its student (`images/jupyter`): the portal offers it.
    #[serde(default)]
    pub jupyter: Option<bool>,
}

/// `POST /api/v1/images/publish` (like `lxc publish`): the instance must be stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishImage {
    pub instance: String,
    pub alias: String,
    #[serde(default)]
    pub description: Option<String>,
}

/// `PATCH /api/v1/images/{name}` (admin): the image's new alias. How an image an instructor
/// published under their own name (`<username>/...`) is promoted into the shared names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImagePatch {
    pub alias: String,
}

/// Answer of `POST /api/v1/images/{name}/distribute`: an operation with one item per online
/// node still lacking the image (none: it ends at once), and the nodes left out and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageDistribution {
    pub operation: super::operations::Operation,
    /// Nodes that already hold the image: not imported again.
    pub already_held: Vec<String>,
    /// Nodes not online (offline, cordoned, evacuating), with their state: not asked.
    pub skipped: Vec<SkippedNode>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkippedNode {
    pub node: String,
    pub state: String,
}
