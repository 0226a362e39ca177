//! `/1.0/instances/{name}/snapshots`: list, make, read, rename, restore and delete an instance's
//! snapshots (`client/lxd_instances.go`; `shared/api/instance_snapshot.go`).

use chrono::{DateTime, Utc};
use hyper::Method;
use serde::{Deserialize, Serialize};

use super::client::encode;
use super::instances::{instance_url, InstancePut};
use super::{Lxd, LxdError};

fn snapshots_url(instance: &str) -> String {
    format!("{}/snapshots", instance_url(instance))
}

fn snapshot_url(instance: &str, snapshot: &str) -> String {
    format!("{}/{}", snapshots_url(instance), encode(snapshot))
}

/// A snapshot as LXD gives it.
#[derive(Debug, Deserialize)]
pub struct InstanceSnapshot {
    /// The snapshot's own name (older servers answer `instance/snap`).
    pub name: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub stateful: bool,
}

/// The body of `POST /1.0/instances/{name}/snapshots` (`InstanceSnapshotsPost`).
#[derive(Debug, Serialize)]
pub struct InstanceSnapshotsPost {
    pub name: String,
    pub stateful: bool,
}

impl Lxd {
    /// `GET /1.0/instances/{name}/snapshots?recursion=1`.
    pub async fn get_instance_snapshots(
        &self,
        instance: &str,
    ) -> Result<Vec<InstanceSnapshot>, LxdError> {
        self.get_as(&format!("{}?recursion=1", snapshots_url(instance)))
            .await
    }

    /// `GET /1.0/instances/{name}/snapshots/{snapshot}`.
    pub async fn get_instance_snapshot(
        &self,
        instance: &str,
        snapshot: &str,
    ) -> Result<InstanceSnapshot, LxdError> {
        self.get_as(&snapshot_url(instance, snapshot)).await
    }

    /// `POST /1.0/instances/{name}/snapshots`.
    pub async fn create_instance_snapshot(
        &self,
        instance: &str,
        snapshot: &InstanceSnapshotsPost,
    ) -> Result<(), LxdError> {
        self.send_json(Method::POST, &snapshots_url(instance), snapshot)
            .await
            .map(|_| ())
    }

    /// `POST /1.0/instances/{name}/snapshots/{snapshot}` with a new name alone (a rename on this
    /// node, not a migration; `InstanceSnapshotPost`).
    pub async fn rename_instance_snapshot(
        &self,
        instance: &str,
        snapshot: &str,
        new_name: &str,
    ) -> Result<(), LxdError> {
        let post = serde_json::json!({ "name": new_name });
        self.send_json(Method::POST, &snapshot_url(instance, snapshot), &post)
            .await
            .map(|_| ())
    }

    /// `PUT /1.0/instances/{name}` with `restore` alone: the instance as it was in `snapshot`.
    pub async fn restore_instance_snapshot(
        &self,
        instance: &str,
        snapshot: &str,
    ) -> Result<(), LxdError> {
        let put = InstancePut {
            restore: Some(snapshot.into()),
            ..Default::default()
        };
        self.send_json(Method::PUT, &instance_url(instance), &put)
            .await
            .map(|_| ())
    }

    /// `DELETE /1.0/instances/{name}/snapshots/{snapshot}`.
    pub async fn delete_instance_snapshot(
        &self,
        instance: &str,
        snapshot: &str,
    ) -> Result<(), LxdError> {
        self.call(Method::DELETE, &snapshot_url(instance, snapshot), None)
            .await
            .map(|_| ())
    }
}
