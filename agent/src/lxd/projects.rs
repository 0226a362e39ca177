//! `/1.0/projects`: the project the agent keeps its instances in (`client/lxd_projects.go`).

use serde::Deserialize;

use super::client::encode;
use super::{Lxd, LxdError};

/// A project as `GET /1.0/projects/{name}` gives it.
#[derive(Debug, Deserialize)]
pub struct Project {
    pub name: String,
    /// `features.storage.volumes` says whether the project keeps custom volumes of its own.
    #[serde(default)]
    pub config: super::Config,
}

impl Lxd {
    /// `GET /1.0/projects/{name}`.
    pub async fn get_project(&self, name: &str) -> Result<Project, LxdError> {
        self.get_as(&format!("/1.0/projects/{}", encode(name)))
            .await
    }
}
