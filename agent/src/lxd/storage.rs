//! `/1.0/storage-pools`: the pool's driver and space, and the custom volumes that hold homes
//! (`client/lxd_storage_pools.go`, `lxd_storage_volumes.go`, `shared/api/storage_pool_volume.go`).

use hyper::Method;
use serde::{Deserialize, Serialize};

use super::client::encode;
use super::server::ServerError;
use super::{null_as_empty, Config, Lxd, LxdError};

pub(super) fn pool_url(pool: &str) -> String {
    format!("/1.0/storage-pools/{}", encode(pool))
}

pub(super) fn custom_volume_url(pool: &str, volume: &str) -> String {
    format!("{}/volumes/custom/{}", pool_url(pool), encode(volume))
}

#[derive(Debug, Clone, Deserialize)]
struct StoragePool {
    driver: String,
}

/// `GET /1.0/storage-pools/<pool>/resources`: the pool's space as its driver counts it.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
pub struct PoolSpace {
    pub used: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Deserialize)]
struct StoragePoolResources {
    space: PoolSpace,
}

/// A custom volume as `GET .../volumes/custom/{name}` gives it.
#[derive(Debug, Clone, Deserialize)]
pub struct StorageVolume {
    #[serde(default, deserialize_with = "null_as_empty")]
    pub config: Config,
    /// The instances (as URLs) that use it.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub used_by: Vec<String>,
}

/// A custom volume's snapshot as `GET .../volumes/custom/{name}/snapshots?recursion=1` gives it
/// (`StorageVolumeSnapshot`).
#[derive(Debug, Clone, Deserialize)]
pub struct StorageVolumeSnapshot {
    /// The snapshot's own name (some servers answer `volume/snap`).
    pub name: String,
    #[serde(default)]
    pub created_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// The body of `POST /1.0/storage-pools/{pool}/volumes` (`StorageVolumesPost`).
#[derive(Debug, Clone, Serialize)]
pub struct StorageVolumesPost {
    pub name: String,
    /// `custom`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `filesystem` or `block`.
    pub content_type: String,
    pub config: Config,
}

/// The body of `PATCH .../volumes/custom/{name}` (`StorageVolumePut`, config alone).
#[derive(Debug, Clone, Serialize)]
pub struct StorageVolumePut {
    pub config: Config,
}

impl Lxd {
    /// The used and total bytes of a storage pool.
    pub async fn pool_space(&self, pool: &str) -> Result<PoolSpace, LxdError> {
        let path = format!("{}/resources", pool_url(pool));
        Ok(self.get_as::<StoragePoolResources>(&path).await?.space)
    }

    /// The driver of a storage pool (`btrfs`, `zfs`, `dir`, ...).
    pub async fn pool_driver(&self, pool: &str) -> Result<String, ServerError> {
        match self.get_as::<StoragePool>(&pool_url(pool)).await {
            Ok(p) => Ok(p.driver),
            Err(source) => Err(ServerError::MissingPool {
                pool: pool.to_string(),
                source,
            }),
        }
    }

    /// `GET /1.0/storage-pools/{pool}/volumes/custom/{name}`.
    pub async fn get_custom_volume(
        &self,
        pool: &str,
        volume: &str,
    ) -> Result<StorageVolume, LxdError> {
        self.get_as(&custom_volume_url(pool, volume)).await
    }

    /// `GET /1.0/storage-pools/{pool}/volumes/custom`: the names of the project's custom volumes.
    pub async fn get_custom_volume_names(&self, pool: &str) -> Result<Vec<String>, LxdError> {
        let urls: Vec<String> = self
            .get_as(&format!("{}/volumes/custom", pool_url(pool)))
            .await?;
        Ok(urls
            .iter()
            .filter_map(|u| u.split('?').next()?.rsplit('/').next())
            .map(String::from)
            .collect())
    }

    /// `POST /1.0/storage-pools/{pool}/volumes`.
    pub async fn create_volume(
        &self,
        pool: &str,
        volume: &StorageVolumesPost,
    ) -> Result<(), LxdError> {
        let path = format!("{}/volumes", pool_url(pool));
        self.send_json(Method::POST, &path, volume)
            .await
            .map(|_| ())
    }

    /// `PATCH /1.0/storage-pools/{pool}/volumes/custom/{name}`.
    pub async fn patch_custom_volume(
        &self,
        pool: &str,
        volume: &str,
        put: &StorageVolumePut,
    ) -> Result<(), LxdError> {
        self.send_json(Method::PATCH, &custom_volume_url(pool, volume), put)
            .await
            .map(|_| ())
    }

    /// `GET /1.0/storage-pools/{pool}/volumes/custom/{name}/snapshots?recursion=1`.
    pub async fn get_custom_volume_snapshots(
        &self,
        pool: &str,
        volume: &str,
    ) -> Result<Vec<StorageVolumeSnapshot>, LxdError> {
        let path = format!("{}/snapshots?recursion=1", custom_volume_url(pool, volume));
        self.get_as(&path).await
    }

    /// `PUT /1.0/storage-pools/{pool}/volumes/custom/{name}` with `restore`: the volume back to
    /// its snapshot `snapshot` (refused while a running instance uses it).
    pub async fn restore_custom_volume(
        &self,
        pool: &str,
        volume: &str,
        snapshot: &str,
    ) -> Result<(), LxdError> {
        let body = serde_json::json!({ "restore": snapshot });
        self.send_json(Method::PUT, &custom_volume_url(pool, volume), &body)
            .await
            .map(|_| ())
    }

    /// `DELETE /1.0/storage-pools/{pool}/volumes/custom/{name}`.
    pub async fn delete_custom_volume(&self, pool: &str, volume: &str) -> Result<(), LxdError> {
        self.call(Method::DELETE, &custom_volume_url(pool, volume), None)
            .await
            .map(|_| ())
    }
}
