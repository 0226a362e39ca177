//! The agent's configuration: one TOML file (written by `join`, read by `serve --config FILE`)
//! with `COHORT_AGENT_*` environment overrides. Every default is documented on its field.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::network::{NetworkConfig, NetworkMode};

/// Default state directory: key, certificate, CA and config live here.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/cohort-agent";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// This node's name, as enrolled (the CN of its certificate). Required.
    pub node_name: String,
    /// Address the mutual-TLS API listens on. Default `0.0.0.0:9443`.
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Directory holding `agent.key` (0600), `agent.crt`, `ca.crt` and `agent.toml`.
    /// Default `/var/lib/cohort-agent`.
    #[serde(default = "default_state_dir")]
    pub state_dir: PathBuf,
    /// The daemon's unix socket, LXD's or Incus's. Default: the first that exists of
    /// `$INCUS_DIR/unix.socket`, `$LXD_DIR/unix.socket`, `/var/lib/incus/unix.socket`,
    /// `/var/lib/lxd/unix.socket`, `/var/snap/lxd/common/lxd/unix.socket`: Incus where both run.
    /// `join` writes the one it found here, so an enrolled node keeps its daemon.
    #[serde(default)]
    pub lxd_socket: Option<PathBuf>,
    /// LXD project every call is made in. Default `default`.
    #[serde(default = "default_project")]
    pub lxd_project: String,
    /// LXD storage pool for root disks and home volumes. Default `cohort`.
    #[serde(default = "default_pool")]
    pub storage_pool: String,
    /// Host address SSH proxy devices listen on when a request names none (`0.0.0.0` means every
    /// address; readiness is then probed on 127.0.0.1). Default `0.0.0.0`.
    #[serde(default = "default_ssh_listen")]
    pub ssh_listen: String,
    /// Most instance creates running at once. Default: twice the number of cores.
    #[serde(default)]
    pub max_concurrent_creates: Option<usize>,
    /// Seconds to wait for sshd to answer on a new instance's port. Default 120.
    #[serde(default = "default_ssh_ready_timeout")]
    pub ssh_ready_timeout_s: u64,
    /// Seconds the agent waits for the daemon to create an instance before it answers 503
    /// `creating` (the daemon goes on; a retry waits on the same create). Default 300.
    #[serde(default = "default_create_wait")]
    pub create_wait_s: u64,
    /// Path of `libnvidia-ml.so`. Default: the system's `libnvidia-ml.so` via the loader.
    #[serde(default)]
    pub nvml_library: Option<PathBuf>,
    /// A second, plain-HTTP listener serving only `GET /metrics`, for a Prometheus on this host.
    /// Must be a loopback address. Default: none (metrics only behind mutual TLS, `/v1/metrics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<SocketAddr>,
    /// Move a new container's files into its id range before its first start, where LXD would
    /// otherwise chown them on the start (no idmapped mounts for LXD; `cohort-agent doctor`
    /// says when). Default `true`.
    #[serde(default = "default_true")]
    pub shift_before_first_start: bool,
    /// Most snapshots one instance may have; a snapshot past it is refused (409). Scheduled
    /// snapshots are bounded by the expiry the controller forces on every schedule instead.
    /// Default 10.
    #[serde(default = "default_max_snapshots")]
    pub max_snapshots: usize,
    /// The node network (`[network]`): a managed NAT bridge `cohort0` on `10.161.16.0/22` by
    /// default; see [`NetworkConfig`].
    #[serde(default)]
    pub network: NetworkConfig,
}

fn default_listen() -> SocketAddr {
    "0.0.0.0:9443".parse().expect("valid default address")
}
fn default_state_dir() -> PathBuf {
    PathBuf::from(DEFAULT_STATE_DIR)
}
fn default_project() -> String {
    "default".into()
}
fn default_pool() -> String {
    "cohort".into()
}
fn default_ssh_listen() -> String {
    "0.0.0.0".into()
}
fn default_ssh_ready_timeout() -> u64 {
    120
}
fn default_create_wait() -> u64 {
    300
}
fn default_max_snapshots() -> usize {
    10
}
fn default_true() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// the config file cannot be read
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// the config file is not valid TOML for the agent
    #[error("invalid config {path}: {message}")]
    Parse { path: String, message: String },
    /// an environment override has a bad value
    #[error("environment variable {var}={value:?} is invalid: {message}")]
    Env {
        var: String,
        value: String,
        message: String,
    },
}

impl AgentConfig {
    /// A config with every default and the given node name.
    pub fn new(node_name: &str) -> Self {
        toml::from_str(&format!("node_name = {:?}", node_name)).expect("defaults parse")
    }

    /// Reads `path`, then applies `COHORT_AGENT_<FIELD>` environment overrides.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config: AgentConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        config.apply_env(|k| std::env::var(k).ok())?;
        Ok(config)
    }

    /// Overrides from `COHORT_AGENT_NODE_NAME`, `_LISTEN`, `_STATE_DIR`, `_LXD_SOCKET`,
    /// `_LXD_PROJECT`, `_STORAGE_POOL`, `_SSH_LISTEN`, `_MAX_CONCURRENT_CREATES`,
    /// `_SSH_READY_TIMEOUT_S`, `_CREATE_WAIT_S`, `_NVML_LIBRARY`, `_METRICS_LISTEN`, `_SHIFT_BEFORE_FIRST_START`,
    /// `_MAX_SNAPSHOTS`, `_NETWORK_MODE`, `_NETWORK_NAME`, `_NETWORK_SUBNET`, `_NETWORK_SSH_ADDRESS`.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        fn parsed<T: std::str::FromStr>(var: &str, value: String) -> Result<T, ConfigError>
        where
            T::Err: std::fmt::Display,
        {
            value.parse().map_err(|e: T::Err| ConfigError::Env {
                var: var.into(),
                value: value.clone(),
                message: e.to_string(),
            })
        }
        let var = |field: &str| format!("COHORT_AGENT_{field}");
        if let Some(v) = get(&var("NODE_NAME")) {
            self.node_name = v;
        }
        if let Some(v) = get(&var("LISTEN")) {
            self.listen = parsed(&var("LISTEN"), v)?;
        }
        if let Some(v) = get(&var("STATE_DIR")) {
            self.state_dir = v.into();
        }
        if let Some(v) = get(&var("LXD_SOCKET")) {
            self.lxd_socket = Some(v.into());
        }
        if let Some(v) = get(&var("LXD_PROJECT")) {
            self.lxd_project = v;
        }
        if let Some(v) = get(&var("STORAGE_POOL")) {
            self.storage_pool = v;
        }
        if let Some(v) = get(&var("SSH_LISTEN")) {
            self.ssh_listen = v;
        }
        if let Some(v) = get(&var("MAX_CONCURRENT_CREATES")) {
            self.max_concurrent_creates = Some(parsed(&var("MAX_CONCURRENT_CREATES"), v)?);
        }
        if let Some(v) = get(&var("SSH_READY_TIMEOUT_S")) {
            self.ssh_ready_timeout_s = parsed(&var("SSH_READY_TIMEOUT_S"), v)?;
        }
        if let Some(v) = get(&var("CREATE_WAIT_S")) {
            self.create_wait_s = parsed(&var("CREATE_WAIT_S"), v)?;
        }
        if let Some(v) = get(&var("NVML_LIBRARY")) {
            self.nvml_library = Some(v.into());
        }
        if let Some(v) = get(&var("METRICS_LISTEN")) {
            self.metrics_listen = Some(parsed(&var("METRICS_LISTEN"), v)?);
        }
        if let Some(v) = get(&var("SHIFT_BEFORE_FIRST_START")) {
            self.shift_before_first_start = parsed(&var("SHIFT_BEFORE_FIRST_START"), v)?;
        }
        if let Some(v) = get(&var("MAX_SNAPSHOTS")) {
            self.max_snapshots = parsed(&var("MAX_SNAPSHOTS"), v)?;
        }
        if let Some(v) = get(&var("NETWORK_MODE")) {
            self.network.mode = parsed::<NetworkMode>(&var("NETWORK_MODE"), v)?;
        }
        if let Some(v) = get(&var("NETWORK_NAME")) {
            self.network.name = v;
        }
        if let Some(v) = get(&var("NETWORK_SUBNET")) {
            self.network.subnet = parsed(&var("NETWORK_SUBNET"), v)?;
        }
        if let Some(v) = get(&var("NETWORK_SSH_ADDRESS")) {
            self.network.ssh_address = Some(parsed(&var("NETWORK_SSH_ADDRESS"), v)?);
        }
        Ok(())
    }

    /// The LXD socket to use: the configured one, else the first default that exists.
    pub fn lxd_socket(&self) -> PathBuf {
        if let Some(p) = &self.lxd_socket {
            return p.clone();
        }
        default_lxd_socket()
    }

    /// LXD's own directory (`LXD_DIR`): where its socket is.
    pub fn lxd_dir(&self) -> PathBuf {
        let socket = self.lxd_socket();
        socket.parent().map(PathBuf::from).unwrap_or_default()
    }

    /// Where LXD mounts the storage pool: next to its socket, under `storage-pools/`.
    pub fn pool_path(&self) -> PathBuf {
        self.lxd_dir()
            .join("storage-pools")
            .join(&self.storage_pool)
    }

    /// The name LXD gives an instance's volume and log directory on this host: the instance's
    /// own in the default project, `project_name` in any other.
    pub fn lxd_local_name(&self, instance: &str) -> String {
        lxd_local_name(&self.lxd_project, instance)
    }

    pub fn max_concurrent_creates(&self) -> usize {
        self.max_concurrent_creates
            .unwrap_or_else(|| 2 * crate::host::cores() as usize)
            .max(1)
    }

    pub fn key_path(&self) -> PathBuf {
        self.state_dir.join("agent.key")
    }
    pub fn cert_path(&self) -> PathBuf {
        self.state_dir.join("agent.crt")
    }
    pub fn ca_path(&self) -> PathBuf {
        self.state_dir.join("ca.crt")
    }
    pub fn config_path(&self) -> PathBuf {
        self.state_dir.join("agent.toml")
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("config serialises")
    }
}

/// The first of [`socket_candidates`] (from `INCUS_DIR` and `LXD_DIR`) that exists, or the first
/// candidate when none does (so the error names it).
pub fn default_lxd_socket() -> PathBuf {
    let candidates = socket_candidates(
        std::env::var_os("INCUS_DIR").map(PathBuf::from),
        std::env::var_os("LXD_DIR").map(PathBuf::from),
    );
    candidates
        .iter()
        .find(|p| p.exists())
        .unwrap_or(&candidates[0])
        .clone()
}

/// Where to look for the daemon's socket, in order: a directory named in the environment
/// first (Incus's, then LXD's: someone chose it), then the packaged places, Incus's before
/// LXD's. Incus comes first where both are installed because it brings a class up in about
/// half LXD 5.0's time (no remapping of each new container's files, no idmap race: see
/// docs/daemons.md); a node meant to use LXD beside it names LXD's socket.
pub fn socket_candidates(incus_dir: Option<PathBuf>, lxd_dir: Option<PathBuf>) -> Vec<PathBuf> {
    incus_dir
        .into_iter()
        .chain(lxd_dir)
        .chain([
            PathBuf::from("/var/lib/incus"),
            PathBuf::from("/var/lib/lxd"),
            PathBuf::from("/var/snap/lxd/common/lxd"),
        ])
        .map(|d| d.join("unix.socket"))
        .collect()
}

/// The name LXD gives an instance's volume and log directory on this host, in `project`
/// (see [`AgentConfig::lxd_local_name`]).
pub fn lxd_local_name(project: &str, instance: &str) -> String {
    if project == "default" {
        instance.to_string()
    } else {
        format!("{project}_{instance}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_documented_values() {
        let c = AgentConfig::new("gpu-01");
        assert_eq!(c.listen.to_string(), "0.0.0.0:9443");
        assert_eq!(c.state_dir, PathBuf::from(DEFAULT_STATE_DIR));
        assert_eq!(c.lxd_project, "default");
        assert_eq!(c.storage_pool, "cohort");
        assert_eq!(c.ssh_listen, "0.0.0.0");
        assert_eq!(c.ssh_ready_timeout_s, 120);
        assert_eq!(
            c.max_concurrent_creates(),
            2 * crate::host::cores() as usize
        );
        assert!(c.nvml_library.is_none());
        assert_eq!(c.network, NetworkConfig::default());
        assert_eq!(c.network.mode, NetworkMode::Managed);
    }

    #[test]
    fn lxd_paths_follow_the_socket_and_the_project() {
        let mut c = AgentConfig::new("gpu-01");
        c.lxd_socket = Some("/srv/lxd/unix.socket".into());
        c.storage_pool = "fast".into();
        assert_eq!(c.lxd_dir(), PathBuf::from("/srv/lxd"));
        assert_eq!(c.pool_path(), PathBuf::from("/srv/lxd/storage-pools/fast"));
        assert_eq!(c.lxd_local_name("alice"), "alice");
        c.lxd_project = "cs101".into();
        assert_eq!(c.lxd_local_name("alice"), "cs101_alice");
    }

    #[test]
    fn toml_round_trips_and_env_overrides() {
        let mut c = AgentConfig::new("gpu-01");
        c.lxd_project = "p1".into();
        let mut back: AgentConfig = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(back, c);
        back.apply_env(|k| match k {
            "COHORT_AGENT_LXD_PROJECT" => Some("p2".into()),
            "COHORT_AGENT_MAX_CONCURRENT_CREATES" => Some("3".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(back.lxd_project, "p2");
        assert_eq!(back.max_concurrent_creates(), 3);
        let bad = back.apply_env(|k| (k == "COHORT_AGENT_LISTEN").then(|| "nope".into()));
        assert!(bad.unwrap_err().to_string().contains("COHORT_AGENT_LISTEN"));
        assert!(back.shift_before_first_start, "on by default");
        back.apply_env(|k| (k == "COHORT_AGENT_SHIFT_BEFORE_FIRST_START").then(|| "false".into()))
            .unwrap();
        assert!(!back.shift_before_first_start);
        back.apply_env(|k| match k {
            "COHORT_AGENT_NETWORK_MODE" => Some("existing".into()),
            "COHORT_AGENT_NETWORK_NAME" => Some("campus0".into()),
            "COHORT_AGENT_NETWORK_SSH_ADDRESS" => Some("192.0.2.7".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(back.network.mode, NetworkMode::Existing);
        assert_eq!(back.network.name, "campus0");
        assert_eq!(back.network.ssh_address, Some("192.0.2.7".parse().unwrap()));
        let bad = back.apply_env(|k| (k == "COHORT_AGENT_NETWORK_MODE").then(|| "nat".into()));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("COHORT_AGENT_NETWORK_MODE"));
        let bad =
            back.apply_env(|k| (k == "COHORT_AGENT_NETWORK_SUBNET").then(|| "10.0.0.0".into()));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("COHORT_AGENT_NETWORK_SUBNET"));
        let bad = back
            .apply_env(|k| (k == "COHORT_AGENT_SHIFT_BEFORE_FIRST_START").then(|| "maybe".into()));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("COHORT_AGENT_SHIFT_BEFORE_FIRST_START=\"maybe\""));
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(toml::from_str::<AgentConfig>("node_name = \"a\"\nbogus = 1").is_err());
    }

    #[test]
    fn sockets_are_looked_for_incus_first_and_named_directories_before_packaged_ones() {
        let s = |p: &str| PathBuf::from(p).join("unix.socket");
        assert_eq!(
            socket_candidates(None, None),
            [
                s("/var/lib/incus"),
                s("/var/lib/lxd"),
                s("/var/snap/lxd/common/lxd")
            ]
        );
        assert_eq!(
            socket_candidates(Some("/srv/incus".into()), Some("/srv/lxd".into())),
            [
                s("/srv/incus"),
                s("/srv/lxd"),
                s("/var/lib/incus"),
                s("/var/lib/lxd"),
                s("/var/snap/lxd/common/lxd")
            ]
        );
        // A named LXD directory is someone's choice: it comes before Incus's packaged one.
        assert_eq!(
            socket_candidates(None, Some("/srv/lxd".into()))[0],
            s("/srv/lxd")
        );
    }

    #[test]
    fn the_pool_is_mounted_next_to_the_socket() {
        let mut config: AgentConfig = toml::from_str("node_name = \"a\"").unwrap();
        config.lxd_socket = Some("/srv/lxd/unix.socket".into());
        config.storage_pool = "cohort".into();
        assert_eq!(
            config.pool_path(),
            std::path::Path::new("/srv/lxd/storage-pools/cohort")
        );
    }
}
