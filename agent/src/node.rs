//! The node this agent runs: its configuration and LXD connection (checked at start), and the
//! services it is made of (network, idmap, instances, images, GPUs), each built once here and
//! handed what it needs; the API calls them through it. What the node reports itself (health,
//! inventory) is here too. The TLS identity is held beside it (`identity`, `api::serve`).

use std::path::PathBuf;
use std::sync::Arc;

use cohort_proto::agent::{Health, Inventory, LxdFacts, NetworkFacts};

use crate::config::AgentConfig;
use crate::gpu::Gpus;
use crate::idmap::Idmap;
pub use crate::idmap::ShiftTotals;
use crate::images::Images;
use crate::instances::{FileContent, InstanceError, Instances};
use crate::lxd::server::ServerError;
use crate::lxd::{Daemon, Lxd, LxdError};
use crate::network::{Network, NetworkError};

pub struct Node {
    pub config: AgentConfig,
    pub lxd: Lxd,
    /// LXD or Incus, its version, and what the agent does differently for it.
    pub daemon: Daemon,
    storage_driver: String,
    /// The node network (or why there is none), address reservations and the firewall.
    pub network: Arc<Network>,
    /// Id ranges, and the shift before a container's first start.
    pub idmap: Arc<Idmap>,
    /// The containers: every instance verb.
    pub instances: Instances,
    pub images: Arc<Images>,
    pub gpus: Gpus,
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
        let idmap = Arc::new(
            Idmap::new(
                lxd.clone(),
                daemon.clone(),
                &config,
                &info.environment,
                &storage_driver,
            )
            .await,
        );
        let network =
            Arc::new(Network::connect(lxd.clone(), config.lxd_socket(), &config.network).await?);
        let images = Arc::new(Images::new(lxd.clone(), &config));
        let gpus = Gpus::new(
            lxd.clone(),
            config.nvml_library.clone(),
            config.lxd_project.clone(),
        );
        let instances = Instances::new(
            config.clone(),
            lxd.clone(),
            daemon.clone(),
            storage_driver.clone(),
            network.clone(),
            idmap.clone(),
            images.clone(),
        );
        network.rebuild_firewall().await;
        Ok(Node {
            config,
            lxd,
            daemon,
            storage_driver,
            network,
            idmap,
            instances,
            images,
            gpus,
        })
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
    /// start, because LXD would do it (slowly) on the start (see [`Idmap`]).
    pub fn lxd_remaps_first_start(&self) -> bool {
        self.idmap.remaps_first_start()
    }

    /// Containers shifted before their first start since the agent started, and the time it took.
    pub fn first_start_shifts(&self) -> ShiftTotals {
        self.idmap.first_start_shifts()
    }

    /// File calls tried again since the agent started, after LXD's file helper lost its socket.
    pub fn file_helper_retries(&self) -> u64 {
        self.instances.file_helper_retries()
    }

    /// The instance's root filesystem on this host (see [`Idmap::rootfs`]).
    pub fn rootfs(&self, name: &str) -> PathBuf {
        self.idmap.rootfs(name)
    }

    /// [`Instances::shift_before_first_start`], as the end-to-end tests call it.
    pub async fn shift_before_first_start(&self, name: &str) -> Result<bool, InstanceError> {
        self.instances.shift_before_first_start(name).await
    }

    /// [`Instances::push_file`], as the end-to-end tests call it.
    pub async fn push_file(
        &self,
        name: &str,
        path: &str,
        bytes: bytes::Bytes,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), InstanceError> {
        self.instances
            .push_file(name, path, bytes, mode, uid, gid)
            .await
    }

    /// [`Instances::pull_file`], as the end-to-end tests call it.
    pub async fn pull_file(&self, name: &str, path: &str) -> Result<FileContent, InstanceError> {
        self.instances.pull_file(name, path).await
    }

    /// [`Images::import_image`], as the end-to-end tests call it.
    pub async fn import_image(
        &self,
        req: &cohort_proto::agent::ImportImage,
    ) -> Result<cohort_proto::agent::Image, crate::images::ImageError> {
        self.images.import_image(req).await
    }

    /// The names of this project's instances (one LXD call, `recursion=0`).
    pub async fn instance_names(&self) -> Result<Vec<String>, NodeError> {
        Ok(self.lxd.get_instance_names().await?)
    }

    /// The node network for the inventory.
    async fn network_facts(&self) -> Result<Option<NetworkFacts>, NodeError> {
        let Some(n) = &self.network.current else {
            return Ok(None);
        };
        let free = self.network.free_addresses(n).await.map_err(|e| match e {
            NetworkError::Lxd(e) => NodeError::Lxd(e),
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
        let gpus = self.gpus.inventory().await?;
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
            images: self.images.images().await?,
            network: self.network_facts().await?,
        })
    }
}
