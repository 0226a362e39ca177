//! Snapshots of an instance: list, create (within the room `snapshot_room` allows), restore,
//! delete.

use cohort_proto::agent::Snapshot;

use super::InstanceError;
use super::Instances;
use crate::lxd::instance_snapshots::{InstanceSnapshot as LxdSnapshot, InstanceSnapshotsPost};
use crate::lxd::LxdError;

impl From<LxdSnapshot> for Snapshot {
    fn from(s: LxdSnapshot) -> Self {
        Snapshot {
            // Older servers answer `instance/snap`; the API speaks of the snapshot's own name.
            name: s.name.rsplit('/').next().unwrap_or(&s.name).to_string(),
            created_at: s.created_at,
            stateful: s.stateful,
        }
    }
}

pub(super) fn check_snapshot_name(name: &str) -> Result<(), InstanceError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(InstanceError::invalid(
            "name",
            "snapshot name must be 1-63 characters of a-z, A-Z, 0-9, '-', '_' and '.'",
        ))
    }
}

fn not_found(name: &str, what: &str, e: LxdError) -> InstanceError {
    if e.is_not_found() {
        InstanceError::NotFound {
            field: None,
            message: format!(
                "{what} of {name} not found (LXD: {})",
                e.lxd_message().unwrap_or_default()
            ),
        }
    } else {
        e.into()
    }
}

impl Instances {
    pub async fn snapshots(&self, name: &str) -> Result<Vec<Snapshot>, InstanceError> {
        super::check_name(name)?;
        let list = self
            .lxd
            .get_instance_snapshots(name)
            .await
            .map_err(|e| not_found(name, "instance", e))?;
        Ok(list.into_iter().map(Snapshot::from).collect())
    }

    pub async fn create_snapshot(&self, name: &str, snap: &str) -> Result<Snapshot, InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        // One snapshot at a time on this node: two made at once would both find room.
        let _one = self.snapshot_lock.lock().await;
        let existing: Vec<String> = self
            .snapshots(name)
            .await?
            .into_iter()
            .map(|s| s.name)
            .collect();
        self.check_snapshot_room(name, &existing).await?;
        let post = InstanceSnapshotsPost {
            name: snap.into(),
            stateful: false,
        };
        self.lxd
            .create_instance_snapshot(name, &post)
            .await
            .map_err(|e| not_found(name, "instance", e))?;
        let got = self.lxd.get_instance_snapshot(name, snap).await?;
        Ok(got.into())
    }

    pub async fn restore_snapshot(&self, name: &str, snap: &str) -> Result<(), InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        self.lxd
            .restore_instance_snapshot(name, snap)
            .await
            .map_err(|e| not_found(name, "snapshot", e))?;
        Ok(())
    }

    /// Gives snapshot `snap` the name `new_name` (refused by LXD if one has it already).
    pub async fn rename_snapshot(
        &self,
        name: &str,
        snap: &str,
        new_name: &str,
    ) -> Result<Snapshot, InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        check_snapshot_name(new_name)?;
        let _one = self.snapshot_lock.lock().await;
        self.lxd
            .rename_instance_snapshot(name, snap, new_name)
            .await
            .map_err(|e| not_found(name, "snapshot", e))?;
        Ok(self.lxd.get_instance_snapshot(name, new_name).await?.into())
    }

    pub async fn delete_snapshot(&self, name: &str, snap: &str) -> Result<(), InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        self.lxd
            .delete_instance_snapshot(name, snap)
            .await
            .map_err(|e| not_found(name, "snapshot", e))?;
        Ok(())
    }
}
