//! Room for one more snapshot. LXD 5.0.2 bounds neither how many snapshots an instance has nor
//! the space they hold: on btrfs the root quota is a qgroup on the live subvolume alone, and each
//! snapshot is a subvolume of its own, so a student with 1 GiB could fill the pool with
//! snapshots of 1 GiB each. So before a snapshot the agent refuses:
//!
//! - the snapshot past `max_snapshots` (agent config, default 10);
//! - on btrfs, a snapshot after which the live root and its snapshots together would reference
//!   more than the root quota. Each snapshot counts at its whole referenced size (what btrfs's
//!   qgroup reports for its subvolume), the most it can ever keep from being freed, so what an
//!   instance's snapshots pin never exceeds its quota, whatever is written or deleted later.
//!   Data shared between snapshots is counted once per snapshot: an upper bound, kept simple.
//!
//! On a btrfs pool with simple quotas (what scripts/setup and scripts/btrfs-simple-quotas make),
//! each extent stays charged to the subvolume that wrote it for as long as anything references
//! it, snapshots included: the live root's qgroup already counts what its snapshots pin, and its
//! limit bounds both. There, as on other drivers, only the count is enforced.

use std::path::{Path, PathBuf};

use super::InstanceError;
use super::Instances;

impl Instances {
    /// Refuses (409) a snapshot of `name` past the count or, on btrfs, the space; `existing` are
    /// its snapshots' names.
    pub(crate) async fn check_snapshot_room(
        &self,
        name: &str,
        existing: &[String],
    ) -> Result<(), InstanceError> {
        let most = self.config.max_snapshots;
        if existing.len() >= most {
            return Err(InstanceError::Conflict(format!(
                "{name} has {} snapshots, the most an instance may have ({most}): delete one first",
                existing.len()
            )));
        }
        if self.storage_driver() != "btrfs" {
            return Ok(());
        }
        let pool = self.config.pool_path();
        let simple = {
            let pool = pool.clone();
            tokio::task::spawn_blocking(move || simple_quotas(&pool))
                .await
                .map_err(|e| InstanceError::Internal(e.to_string()))?
        };
        if simple {
            return Ok(());
        }
        let Some(quota_mib) = self.root_quota_mib(name).await? else {
            return Ok(());
        };
        let local = self.config.lxd_local_name(name);
        let live = pool.join("containers").join(&local);
        let snapshots: Vec<PathBuf> = existing
            .iter()
            .map(|s| pool.join("containers-snapshots").join(&local).join(s))
            .collect();
        let (live_bytes, held_bytes) = tokio::task::spawn_blocking(move || {
            let live_bytes = referenced(&live)?;
            let mut held = 0u64;
            for snap in &snapshots {
                held += referenced(snap)?.unwrap_or(0);
            }
            Ok::<_, InstanceError>((live_bytes, held))
        })
        .await
        .map_err(|e| InstanceError::Internal(e.to_string()))??;
        // Without qgroups btrfs enforces no quota at all, and there is nothing to count with.
        let Some(live_bytes) = live_bytes else {
            return Ok(());
        };
        let quota = quota_mib << 20;
        // The new snapshot references what the live root does now.
        let after = live_bytes + held_bytes + live_bytes;
        if after > quota {
            return Err(InstanceError::Conflict(format!(
                "no room for another snapshot of {name}: its root ({} MiB) and snapshots ({} MiB, \
                 each counted whole) would hold {} MiB with it, over the root quota of {quota_mib} \
                 MiB that counts both: delete a snapshot or files first",
                live_bytes >> 20,
                held_bytes >> 20,
                after >> 20
            )));
        }
        Ok(())
    }

    /// The root disk's quota in MiB, where the agent set one.
    async fn root_quota_mib(&self, name: &str) -> Result<Option<u64>, InstanceError> {
        let Some(lx) = self.lxd_instance(name).await? else {
            return Err(InstanceError::NotFound {
                field: None,
                message: format!("instance {name} not found"),
            });
        };
        Ok(lx
            .devices
            .get("root")
            .and_then(|root| root.get("size"))
            .or_else(|| lx.config.get(super::KEY_ROOT_SIZE))
            .and_then(|size| super::spec::parse_size_mib(size)))
    }
}

// No `btrfs filesystem sync` first: on a pool busy deleting subvolumes a sync waits for the
// whole commit (the snapshot request stalled past its deadline in a full test run), and the
// qgroup figures lag at most one commit interval, while the new snapshot is already counted at
// the whole size of the live root.

/// Whether the btrfs filesystem holding `pool` accounts its quotas in simple mode (Linux 6.7 and
/// later), as its `qgroups/mode` in sysfs says.
fn simple_quotas(pool: &Path) -> bool {
    let Ok(out) = std::process::Command::new("findmnt")
        .args(["-no", "UUID", "--target"])
        .arg(pool)
        .output()
    else {
        return false;
    };
    let uuid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    !uuid.is_empty()
        && std::fs::read_to_string(format!("/sys/fs/btrfs/{uuid}/qgroups/mode"))
            .is_ok_and(|mode| mode.trim() == "squota")
}

/// The bytes btrfs's qgroup says the subvolume at `path` references; `None` when quotas are off.
fn referenced(path: &Path) -> Result<Option<u64>, InstanceError> {
    let out = std::process::Command::new("btrfs")
        .args(["subvolume", "show", "--raw"])
        .arg(path)
        .output()
        .map_err(|e| InstanceError::Internal(format!("running btrfs: {e}")))?;
    if !out.status.success() {
        return Err(InstanceError::Internal(format!(
            "btrfs subvolume show {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(parse_referenced(&String::from_utf8_lossy(&out.stdout)))
}

/// The `Usage referenced:` figure of `btrfs subvolume show --raw`.
fn parse_referenced(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Usage referenced:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::parse_referenced;

    #[test]
    fn reads_the_referenced_figure() {
        let shown = "\tQuota group:\t\t0/258\n\t  Limit referenced:\t1073741824\n\t  Limit exclusive:\t-\n\t  Usage referenced:\t332677120\n\t  Usage exclusive:\t109645824\n";
        assert_eq!(parse_referenced(shown), Some(332677120));
        assert_eq!(parse_referenced("\tQuota group:\t\tn/a\n"), None);
    }
}
