//! The idmap service: reserves and releases isolated ranges on the daemon, knows whether LXD
//! remaps a new container's files on its first start (probed once, at connect), where each
//! container's root filesystem is on this host, and counts the shifts the agent did instead.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::ranges::{
    host_range, live_reservations, pick_base, reservations_path, taken_ranges, unix_now,
    write_reservations, RANGE_SIZE,
};
use crate::config::AgentConfig;
use crate::lxd::server::ServerEnvironment;
use crate::lxd::{Daemon, Lxd, LxdError};

/// What [`Idmap::first_start_shifts`] reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShiftTotals {
    pub count: u64,
    pub seconds: f64,
}

pub struct Idmap {
    lxd: Lxd,
    daemon: Daemon,
    lxd_socket: PathBuf,
    pool_path: PathBuf,
    project: String,
    /// Whether LXD chowns each new container's files on its first start (see `shift`), so the
    /// agent does it first.
    remaps_first_start: bool,
    /// Containers shifted before their first start, and the microseconds it took.
    shifts: AtomicU64,
    shift_us: AtomicU64,
}

impl Idmap {
    /// The service for the daemon behind `lxd`; on a pool whose volumes stay mounted while the
    /// container is stopped (btrfs, dir), probes whether LXD remaps on the first start.
    pub async fn new(
        lxd: Lxd,
        daemon: Daemon,
        config: &AgentConfig,
        env: &ServerEnvironment,
        storage_driver: &str,
    ) -> Self {
        let remaps_first_start = match storage_driver {
            // The drivers whose volumes stay mounted while the container is stopped.
            "btrfs" | "dir" if config.shift_before_first_start => {
                let env = env.clone();
                let pool = config.pool_path();
                let daemon = daemon.clone();
                tokio::task::spawn_blocking(move || {
                    super::probe::first_start(&daemon, &env, &pool).remaps()
                })
                .await
                .unwrap_or(false)
            }
            _ => false,
        };
        Idmap {
            lxd,
            daemon,
            lxd_socket: config.lxd_socket(),
            pool_path: config.pool_path(),
            project: config.lxd_project.clone(),
            remaps_first_start,
            shifts: AtomicU64::new(0),
            shift_us: AtomicU64::new(0),
        }
    }

    /// Whether the agent moves each new container's files into its range before the first
    /// start, because LXD would do it (slowly) on the start.
    pub fn remaps_first_start(&self) -> bool {
        self.remaps_first_start
    }

    /// The instance's root filesystem on this host, where LXD keeps it (mounted for as long as
    /// the pool is, on the btrfs and dir drivers).
    pub fn rootfs(&self, name: &str) -> PathBuf {
        self.pool_path
            .join("containers")
            .join(crate::config::lxd_local_name(&self.project, name))
            .join("rootfs")
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

    /// Picks a free isolated range on this daemon for a container about to be created and
    /// reserves it; the caller holds the daemon's start lock. With the range reserved the
    /// create needs the lock no longer; `release_base` drops the reservation once the
    /// container exists. `None` when the host's range is unknown or full, or the reservation
    /// cannot be written: LXD then picks, and the caller keeps the lock through the first start.
    pub(crate) async fn reserve_base(&self) -> Result<Option<u64>, LxdError> {
        let Some(host) = host_range(Path::new("/etc/subuid"), Path::new("/etc/subgid")) else {
            return Ok(None);
        };
        let host = self.daemon.idmap_window(host);
        let listing = self.lxd.get_instances_all_projects().await?;
        let path = reservations_path(&crate::lxd::lock::start_lock_path(&self.lxd_socket));
        let now = unix_now();
        let mut live = live_reservations(&std::fs::read_to_string(&path).unwrap_or_default(), now);
        let mut taken = taken_ranges(&listing);
        taken.extend(live.iter().map(|&(base, _)| (base, RANGE_SIZE)));
        let Some(base) = pick_base(host, &taken) else {
            return Ok(None);
        };
        live.push((base, now));
        match write_reservations(&path, &live) {
            Ok(()) => Ok(Some(base)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot reserve an idmap range; creating under the daemon lock");
                Ok(None)
            }
        }
    }

    /// Drops the reservation of `base` (the container now exists, or its create failed).
    pub(crate) async fn release_base(&self, base: u64) {
        let lock = crate::lxd::lock::start_lock_path(&self.lxd_socket);
        let _daemon = crate::lxd::lock::start_lock(&self.lxd_socket).await;
        let path = reservations_path(&lock);
        let live: Vec<_> = live_reservations(
            &std::fs::read_to_string(&path).unwrap_or_default(),
            unix_now(),
        )
        .into_iter()
        .filter(|&(b, _)| b != base)
        .collect();
        if let Err(e) = write_reservations(&path, &live) {
            tracing::warn!(path = %path.display(), error = %e, "cannot drop an idmap reservation; it lapses by itself");
        }
    }
}
