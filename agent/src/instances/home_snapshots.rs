//! A home volume's scheduled snapshots, kept by its daemon: `snapshots.schedule` makes them
//! (`@daily`, `@hourly`), `snapshots.expiry` prunes each after `keep` periods, and
//! `snapshots.pattern` names them `auto0`, `auto1`... so they stand apart from any taken by
//! hand. LXD 5.0 and Incus 6.0 take the same three keys on custom volumes, and their own
//! scheduler runs it, so snapshots go on while the agent or the controller is down.

use chrono::{DateTime, Utc};
use cohort_proto::agent::{HomeSnapshot, HomeSnapshots, RestoreHome, SnapshotEvery};

use super::volumes::HOME_PREFIX;
use super::{InstanceError, Instances};
use crate::lxd::storage::StorageVolumePut;
use crate::lxd::Config;

/// How long a running container is given to stop cleanly before a restore forces it.
const STOP_TIMEOUT_S: u32 = 30;

/// The daemon's keys for a home's snapshots.
pub const KEY_SCHEDULE: &str = "snapshots.schedule";
pub const KEY_EXPIRY: &str = "snapshots.expiry";
pub const KEY_PATTERN: &str = "snapshots.pattern";
/// The name pattern of scheduled snapshots (`%d`: the daemon's next free number).
pub const PATTERN: &str = "auto%d";

/// The volume config that makes `schedule` so; off sets the keys empty, which both daemons
/// read as no schedule and no expiry.
pub fn snapshot_config(schedule: Option<HomeSnapshots>) -> Config {
    let (cron, expiry, pattern) = match schedule {
        None => (String::new(), String::new(), String::new()),
        Some(HomeSnapshots { every, keep }) => {
            // The daemon's expiry units: `d` days, `H` hours (`M` would be minutes).
            let (cron, unit) = match every {
                SnapshotEvery::Daily => ("@daily", "d"),
                SnapshotEvery::Hourly => ("@hourly", "H"),
            };
            (
                cron.to_string(),
                format!("{keep}{unit}"),
                PATTERN.to_string(),
            )
        }
    };
    [
        (KEY_SCHEDULE.to_string(), cron),
        (KEY_EXPIRY.to_string(), expiry),
        (KEY_PATTERN.to_string(), pattern),
    ]
    .into()
}

/// Whether `config` already says what `wanted` does (an absent key reads as empty).
pub fn snapshot_config_matches(config: &Config, wanted: &Config) -> bool {
    wanted
        .iter()
        .all(|(k, v)| config.get(k).map(String::as_str).unwrap_or("") == v)
}

/// Refuses a name that is not one of Cohort's home volumes.
pub(super) fn check_home(name: &str) -> Result<(), InstanceError> {
    cohort_proto::validate::instance_name(name)
        .map_err(|e| InstanceError::invalid("name", e.0.replace("instance", "volume")))?;
    if !name.starts_with(HOME_PREFIX) {
        return Err(InstanceError::invalid(
            "name",
            format!("only Cohort home volumes ({HOME_PREFIX}*) are served here"),
        ));
    }
    Ok(())
}

fn volume_not_found(name: &str) -> InstanceError {
    InstanceError::NotFound {
        field: None,
        message: format!("volume {name} not found"),
    }
}

impl Instances {
    /// `GET /v1/volumes/{name}/snapshots`: the home's snapshots, oldest first; 404 when the
    /// volume is absent.
    pub async fn home_snapshots(&self, name: &str) -> Result<Vec<HomeSnapshot>, InstanceError> {
        check_home(name)?;
        let pool = &self.config.storage_pool;
        let mut list = match self.lxd.get_custom_volume_snapshots(pool, name).await {
            Ok(list) => list,
            Err(e) if e.is_not_found() => return Err(volume_not_found(name)),
            Err(e) => return Err(e.into()),
        };
        // LXD 5.0 answers a custom volume snapshot's `created_at` as Go's zero time (year 1):
        // unknown, and then the daemon's own order (creation) stands.
        let known = |t: Option<DateTime<Utc>>| t.filter(|t| t.timestamp() > 0);
        list.sort_by_key(|s| known(s.created_at));
        Ok(list
            .into_iter()
            .map(|s| HomeSnapshot {
                name: s.name.rsplit('/').next().unwrap_or_default().to_string(),
                created_at: known(s.created_at),
                expires_at: known(s.expires_at),
            })
            .collect())
    }

    /// `POST /v1/instances/{name}/home/restore`: both daemons refuse to restore a custom volume
    /// a running instance uses ("Cannot restore custom volume used by running instances"), and
    /// a file system must not change under running programs anyway, so a running container is
    /// stopped first (cleanly, else forced) and started again after, whether the restore
    /// worked or not. A container that is absent (being made again) leaves the volume free.
    pub async fn restore_home(&self, name: &str, req: &RestoreHome) -> Result<(), InstanceError> {
        super::check_name(name)?;
        check_home(&req.volume)?;
        super::snapshots::check_snapshot_name(&req.snapshot).map_err(|_| {
            InstanceError::invalid(
                "snapshot",
                "not a snapshot name (a-z, A-Z, 0-9, '-', '_', '.')",
            )
        })?;
        let running = self
            .lxd_instance(name)
            .await?
            .is_some_and(|lx| lx.status == "Running");
        if running {
            self.stop_instance(name, STOP_TIMEOUT_S, false).await?;
        }
        let pool = &self.config.storage_pool;
        let restored = self
            .lxd
            .restore_custom_volume(pool, &req.volume, &req.snapshot)
            .await;
        if running {
            self.start_instance(name).await?;
        }
        match restored {
            Ok(()) => Ok(()),
            Err(e) if e.is_not_found() => Err(InstanceError::NotFound {
                field: Some("snapshot".into()),
                message: format!("volume {} has no snapshot {}", req.volume, req.snapshot),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// `PUT /v1/volumes/{name}/snapshot-schedule`: 404 when the home volume is absent. The same
    /// schedule again changes nothing.
    pub async fn set_home_snapshots(
        &self,
        name: &str,
        schedule: Option<HomeSnapshots>,
    ) -> Result<(), InstanceError> {
        check_home(name)?;
        if let Some(s) = schedule {
            if !(1..=100).contains(&s.keep) {
                return Err(InstanceError::invalid("keep", "must be 1 to 100"));
            }
        }
        let pool = &self.config.storage_pool;
        let volume = match self.lxd.get_custom_volume(pool, name).await {
            Ok(v) => v,
            Err(e) if e.is_not_found() => return Err(volume_not_found(name)),
            Err(e) => return Err(e.into()),
        };
        let config = snapshot_config(schedule);
        if snapshot_config_matches(&volume.config, &config) {
            return Ok(());
        }
        self.lxd
            .patch_custom_volume(pool, name, &StorageVolumePut { config })
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_become_the_daemons_keys() {
        let daily = snapshot_config(Some(HomeSnapshots {
            every: SnapshotEvery::Daily,
            keep: 7,
        }));
        assert_eq!(daily[KEY_SCHEDULE], "@daily");
        assert_eq!(daily[KEY_EXPIRY], "7d");
        assert_eq!(daily[KEY_PATTERN], "auto%d");
        let hourly = snapshot_config(Some(HomeSnapshots {
            every: SnapshotEvery::Hourly,
            keep: 24,
        }));
        assert_eq!(hourly[KEY_EXPIRY], "24H");
        let off = snapshot_config(None);
        assert!(off.values().all(String::is_empty));
        assert!(snapshot_config_matches(&Config::new(), &off));
        assert!(!snapshot_config_matches(&Config::new(), &daily));
    }
}
