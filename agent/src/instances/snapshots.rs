//! Snapshots of an instance: list, create (within the room `snapshot_room` allows), restore,
//! delete.

use chrono::{DateTime, Utc};
use cohort_proto::agent::Snapshot;
use hyper::Method;
use serde::Deserialize;
use serde_json::json;

use super::InstanceError;
use crate::lxd::{encode, LxdError};
use crate::node::Node;

#[derive(Debug, Deserialize)]
struct LxdSnapshot {
    name: String,
    #[serde(default)]
    created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    stateful: bool,
}

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

fn check_snapshot_name(name: &str) -> Result<(), InstanceError> {
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

impl Node {
    pub async fn snapshots(&self, name: &str) -> Result<Vec<Snapshot>, InstanceError> {
        super::check_name(name)?;
        let path = format!("{}/snapshots?recursion=1", super::path(name));
        let list: Vec<LxdSnapshot> = self
            .lxd
            .get_as(&path)
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
        let path = format!("{}/snapshots", super::path(name));
        self.lxd
            .call(
                Method::POST,
                &path,
                Some(&json!({"name": snap, "stateful": false})),
            )
            .await
            .map_err(|e| not_found(name, "instance", e))?;
        let path = format!("{}/snapshots/{}", super::path(name), encode(snap));
        let got: LxdSnapshot = self.lxd.get_as(&path).await?;
        Ok(got.into())
    }

    pub async fn restore_snapshot(&self, name: &str, snap: &str) -> Result<(), InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        self.lxd
            .call(
                Method::PUT,
                &super::path(name),
                Some(&json!({"restore": snap})),
            )
            .await
            .map_err(|e| not_found(name, "snapshot", e))?;
        Ok(())
    }

    pub async fn delete_snapshot(&self, name: &str, snap: &str) -> Result<(), InstanceError> {
        super::check_name(name)?;
        check_snapshot_name(snap)?;
        let path = format!("{}/snapshots/{}", super::path(name), encode(snap));
        self.lxd
            .call(Method::DELETE, &path, None)
            .await
            .map_err(|e| not_found(name, "snapshot", e))?;
        Ok(())
    }
}
