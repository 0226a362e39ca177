//! `GET /1.0`: the daemon's name, version and API extensions, and the check that refuses to run
//! without the extensions the agent relies on (LXD 5.0 and Incus 6.0 have them all).

use serde::Deserialize;

use super::{Lxd, LxdError};

/// API extensions the agent's calls depend on (all in LXD 5.0).
pub const REQUIRED_EXTENSIONS: &[&str] = &[
    "instances",
    "container_full",
    "projects",
    "container_exec_recording",
    "container_exec_user_group_cwd",
    "proxy",
    "gpu_devices",
    "gpu_mig",
    "nvidia_runtime",
    "nvidia_runtime_config",
    "storage_api_local_volume_handling",
    "custom_block_volumes",
];

#[derive(Debug, Clone, Deserialize)]
pub struct ServerInfo {
    pub api_extensions: Vec<String>,
    pub environment: ServerEnvironment,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ServerEnvironment {
    /// `lxd` or `incus`; absent from LXD releases before 4.x named it.
    #[serde(default)]
    pub server: String,
    pub server_version: String,
    #[serde(default)]
    pub kernel_version: String,
    /// The firewall driver LXD chose when it started (`nftables`, `xtables`), empty when it
    /// found no firewall tool then.
    #[serde(default)]
    pub firewall: String,
    /// What LXD found the kernel can do (`idmapped_mounts`, `shiftfs`, ...), `"true"` or
    /// `"false"`.
    #[serde(default)]
    pub kernel_features: std::collections::BTreeMap<String, String>,
    /// What liblxc can do (`idmapped_mounts_v2`, ...), `"true"` or `"false"`.
    #[serde(default)]
    pub lxc_features: std::collections::BTreeMap<String, String>,
}

impl ServerEnvironment {
    fn has(features: &std::collections::BTreeMap<String, String>, key: &str) -> bool {
        features.get(key).is_some_and(|v| v == "true")
    }

    pub fn kernel_has(&self, feature: &str) -> bool {
        Self::has(&self.kernel_features, feature)
    }

    pub fn lxc_has(&self, feature: &str) -> bool {
        Self::has(&self.lxc_features, feature)
    }
}

impl ServerInfo {
    /// Required extensions this server lacks.
    pub fn missing_extensions(&self) -> Vec<&'static str> {
        REQUIRED_EXTENSIONS
            .iter()
            .copied()
            .filter(|e| !self.api_extensions.iter().any(|have| have == e))
            .collect()
    }
}

/// Why the agent will not run against this LXD.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// LXD could not be asked
    #[error(transparent)]
    Lxd(#[from] LxdError),
    /// required API extensions are missing
    #[error("{version} lacks API extensions the agent needs: {missing}; upgrade to LXD 5.0 or Incus 6.0 or later")]
    MissingExtensions { version: String, missing: String },
    /// the storage pool is missing
    #[error("LXD storage pool {pool:?} does not exist ({source}); create it or set storage_pool")]
    MissingPool { pool: String, source: LxdError },
}

impl Lxd {
    pub async fn server_info(&self) -> Result<ServerInfo, LxdError> {
        self.get_as("/1.0").await
    }

    /// Reads `/1.0` and refuses a server without the required extensions.
    pub async fn check_server(&self) -> Result<ServerInfo, ServerError> {
        let info = self.server_info().await?;
        let missing = info.missing_extensions();
        if !missing.is_empty() {
            return Err(ServerError::MissingExtensions {
                version: format!(
                    "{} {}",
                    info.environment.server, info.environment.server_version
                ),
                missing: missing.join(", "),
            });
        }
        Ok(info)
    }
}
