//! [`Instances`]: what the instance verbs work with, each piece named (the LXD client, the bits
//! of config they read, the network, idmap and images services, the bound on concurrent creates,
//! the snapshot lock, the relayed exec sessions and a counter), built once by `Node::connect`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::ExecSessions;
use crate::config::AgentConfig;
use crate::idmap::Idmap;
use crate::images::Images;
use crate::lxd::{Daemon, Lxd};
use crate::network::Network;

pub struct Instances {
    pub(crate) config: AgentConfig,
    pub(crate) lxd: Lxd,
    /// LXD or Incus, and what the agent does differently for it.
    pub(crate) daemon: Daemon,
    storage_driver: String,
    pub(crate) network: Arc<Network>,
    pub(crate) idmap: Arc<Idmap>,
    pub(crate) images: Arc<Images>,
    /// Permits for concurrent creates (`max_concurrent_creates`).
    pub(crate) creates: Arc<Semaphore>,
    /// The daemon's creates that outlasted a wait, and one turn per idempotency key.
    pub(crate) in_flight: super::InFlight,
    /// Held while a snapshot is checked for room and made (`snapshot_room`).
    pub(crate) snapshot_lock: tokio::sync::Mutex<()>,
    /// The exec sessions relayed to far clients (`exec_session`).
    pub(crate) exec_sessions: ExecSessions,
    /// File calls tried again after LXD's file helper lost its socket (`files`).
    file_helper_retries: AtomicU64,
}

impl Instances {
    pub fn new(
        config: AgentConfig,
        lxd: Lxd,
        daemon: Daemon,
        storage_driver: String,
        network: Arc<Network>,
        idmap: Arc<Idmap>,
        images: Arc<Images>,
    ) -> Self {
        let creates = Arc::new(Semaphore::new(config.max_concurrent_creates()));
        Instances {
            config,
            lxd,
            daemon,
            storage_driver,
            network,
            idmap,
            images,
            creates,
            in_flight: Default::default(),
            snapshot_lock: tokio::sync::Mutex::new(()),
            exec_sessions: Default::default(),
            file_helper_retries: AtomicU64::new(0),
        }
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

    pub(crate) fn record_file_helper_retries(&self, n: u32) {
        self.file_helper_retries
            .fetch_add(u64::from(n), Ordering::Relaxed);
    }

    /// File calls tried again since the agent started, after LXD's file helper lost its socket.
    pub fn file_helper_retries(&self) -> u64 {
        self.file_helper_retries.load(Ordering::Relaxed)
    }
}
