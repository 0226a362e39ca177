//! The node this agent runs: its configuration, its LXD connection (checked at start), the bound
//! on concurrent creates, and what it reports (health, inventory).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cohort_proto::agent::{GpuInventory, Health, Inventory, LxdFacts, NetworkFacts};
use tokio::sync::Semaphore;

use crate::config::AgentConfig;
use crate::lxd::server::ServerError;
use crate::lxd::{Daemon, Lxd, LxdError};
use crate::network::{NetworkError, NodeNetwork};

pub struct Node {
    pub config: AgentConfig,
    pub lxd: Lxd,
    /// Permits for concurrent creates (`max_concurrent_creates`).
    pub(crate) creates: Arc<Semaphore>,
    /// LXD or Incus, its version, and what the agent does differently for it.
    pub daemon: Daemon,
    storage_driver: String,
    /// Whether LXD chowns each new container's files on its first start (see
    /// `instances::shift`), so the agent does it first.
    remaps_first_start: bool,
    /// Containers shifted before their first start, and the microseconds it took.
    shifts: AtomicU64,
    shift_us: AtomicU64,
    /// File calls tried again after LXD's file helper lost its socket (`instances::files`).
    file_helper_retries: AtomicU64,
    /// Held while a snapshot is checked for room and made (`instances::snapshot_room`).
    pub(crate) snapshot_lock: tokio::sync::Mutex<()>,
    /// The node network; `None` in mode `none` or where it could not be had
    /// (`network_problem` says why): SSH then goes through LXD's classic proxy.
    pub network: Option<NodeNetwork>,
    pub network_problem: Option<String>,
    /// The exec sessions relayed to far clients (`instances::exec_session`).
    pub(crate) exec_sessions: crate::instances::ExecSessions,
}

/// What [`Node::first_start_shifts`] reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShiftTotals {
    pub count: u64,
    pub seconds: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// LXD is unusable for this agent
    #[error(transparent)]
    Server(#[from] ServerError),
    /// LXD failed
    #[error(transparent)]
    Lxd(#[from] LxdError),
    /// host facts could not be read
    #[error(transparent)]
    Host(#[from] crate::host::HostError),
    /// the `[network]` config is unusable
    #[error(transparent)]
    Network(#[from] crate::network::NetworkConfigError),
}

impl Node {
    /// Connects to LXD, refuses to go on without the required API extensions or the pool.
    pub async fn connect(config: AgentConfig) -> Result<Self, NodeError> {
        let lxd = Lxd::new(&config.lxd_socket(), &config.lxd_project);
        let info = lxd.check_server().await?;
        let daemon = Daemon::detect(&info, &config.lxd_socket());
        let storage_driver = lxd.pool_driver(&config.storage_pool).await?;
        let creates = Arc::new(Semaphore::new(config.max_concurrent_creates()));
        let remaps_first_start = match storage_driver.as_str() {
            // The drivers whose volumes stay mounted while the container is stopped.
            "btrfs" | "dir" if config.shift_before_first_start => {
                let env = info.environment.clone();
                let pool = config.pool_path();
                let daemon = daemon.clone();
                tokio::task::spawn_blocking(move || {
                    crate::doctor::first_start(&daemon, &env, &pool).remaps()
                })
                .await
                .unwrap_or(false)
            }
            _ => false,
        };
        // A config the admin got wrong stops the agent; a network LXD cannot give (no firewall
        // tool when LXD started, a name taken by something else) leaves the node in fallback
        // mode, said in the log, the inventory and `doctor`.
        let (network, network_problem) = match NodeNetwork::setup(&lxd, &config.network).await {
            Ok(n) => (n, None),
            Err(NetworkError::Config(e)) => return Err(e.into()),
            Err(e) => {
                tracing::error!(error = %e, "no node network: containers get no NIC, SSH goes through LXD's classic proxy");
                (None, Some(e.to_string()))
            }
        };
        let node = Node {
            config,
            lxd,
            creates,
            daemon,
            storage_driver,
            remaps_first_start,
            shifts: AtomicU64::new(0),
            shift_us: AtomicU64::new(0),
            file_helper_retries: AtomicU64::new(0),
            snapshot_lock: tokio::sync::Mutex::new(()),
            network,
            network_problem,
            exec_sessions: Default::default(),
        };
        node.rebuild_firewall().await;
        Ok(node)
    }

    pub fn health(&self) -> Health {
        Health {
            node_name: self.config.node_name.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_string(),
            lxd_version: self.daemon.version.clone(),
            lxd_project: self.config.lxd_project.clone(),
        }
    }

    /// Where LXD mounts the storage pool (see [`AgentConfig::pool_path`]).
    pub fn pool_path(&self) -> PathBuf {
        self.config.pool_path()
    }

    /// The storage pool's driver (`btrfs`, `dir`, `zfs`, ...).
    pub fn storage_driver(&self) -> &str {
        &self.storage_driver
    }

    /// Whether a stopped container's root filesystem stays mounted on this host, where the
    /// agent can reach it (the btrfs and dir drivers).
    pub fn rootfs_on_host(&self) -> bool {
        matches!(self.storage_driver.as_str(), "btrfs" | "dir")
    }

    /// Whether the agent moves each new container's files into its range before the first
    /// start, because LXD would do it (slowly) on the start.
    pub fn lxd_remaps_first_start(&self) -> bool {
        self.remaps_first_start
    }

    /// Counts a container shifted before its first start.
    pub(crate) fn record_shift(&self, took: std::time::Duration) {
        self.shifts.fetch_add(1, Ordering::Relaxed);
        self.shift_us
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Containers shifted before their first start since the agent started, and the time it took.
    pub fn first_start_shifts(&self) -> ShiftTotals {
        ShiftTotals {
            count: self.shifts.load(Ordering::Relaxed),
            seconds: self.shift_us.load(Ordering::Relaxed) as f64 / 1e6,
        }
    }

    pub(crate) fn record_file_helper_retries(&self, n: u32) {
        self.file_helper_retries
            .fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// File calls tried again since the agent started, after LXD's file helper lost its socket.
    pub fn file_helper_retries(&self) -> u64 {
        self.file_helper_retries.load(Ordering::Relaxed)
    }

    /// The names of this project's instances (one LXD call, `recursion=0`).
    pub async fn instance_names(&self) -> Result<Vec<String>, NodeError> {
        Ok(self.lxd.get_instance_names().await?)
    }

    /// The GPU inventory with each compute process attributed to its instance.
    pub async fn gpus(&self) -> Result<GpuInventory, NodeError> {
        let names = self.instance_names().await?;
        let nvml = self.config.nvml_library.clone();
        let project = self.config.lxd_project.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let mut gpus = crate::gpu::inventory(nvml.as_deref());
            crate::gpu::attribute(&mut gpus, &project, &names);
            gpus
        })
        .await
        .expect("GPU inventory does not panic"))
    }

    /// The node network for the inventory.
    async fn network_facts(&self) -> Result<Option<NetworkFacts>, NodeError> {
        let Some(n) = &self.network else {
            return Ok(None);
        };
        let free = self.free_addresses(n).await.map_err(|e| match e {
            crate::instances::InstanceError::Lxd(e) => NodeError::Lxd(e),
            other => NodeError::Lxd(LxdError::Decode {
                what: "free addresses".into(),
                detail: other.to_string(),
            }),
        })?;
        Ok(Some(NetworkFacts {
            name: n.name.clone(),
            subnet: n.subnet.to_string(),
            gateway: n.gateway.to_string(),
            ssh_address: n.ssh_address.to_string(),
            free_addresses: free,
        }))
    }

    pub async fn inventory(&self) -> Result<Inventory, NodeError> {
        let pool_path = self.pool_path();
        let host = tokio::task::spawn_blocking(move || crate::host::facts(&pool_path))
            .await
            .expect("host facts do not panic");
        let gpus = self.gpus().await?;
        let pool = self.lxd.pool_space(&self.config.storage_pool).await?;
        Ok(Inventory {
            node_name: self.config.node_name.clone(),
            host: host?,
            lxd: LxdFacts {
                daemon: self.daemon.kind.as_str().to_string(),
                version: self.daemon.version.clone(),
                project: self.config.lxd_project.clone(),
                storage_pool: self.config.storage_pool.clone(),
                storage_driver: self.storage_driver.clone(),
                pool_used_bytes: pool.used,
                pool_total_bytes: pool.total,
            },
            gpus,
            nvidia_runtime: crate::gpu::nvidia_runtime_available(),
            images: self.images().await?,
            network: self.network_facts().await?,
        })
    }
}
