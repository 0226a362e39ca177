//! `/1.0/instances/{name}/backups` and `/1.0/storage-pools/{pool}/volumes/custom/{name}/backups`:
//! the tarballs a container and its home volume leave one daemon in and arrive at another from
//! (`doc/rest-api.yaml`: `instance_backups_post`, `instance_backup_export_get`,
//! `instances_post` with `application/octet-stream`, and the same for custom volumes). Exports
//! are uncompressed (`compression_algorithm: none`): the tarball crosses a campus network once,
//! and gzip on a node's CPU would take longer than the bytes it saves.

use std::time::Duration;

use hyper::Method;
use serde::Serialize;

use super::client::{encode, to_json, LxdBody, RawStream};
use super::{Lxd, LxdError};

/// Longest an export may take to be written, or an import to be unpacked, in LXD.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(3600);

fn instance_backups(instance: &str) -> String {
    format!("{}/backups", super::instances::instance_url(instance))
}

fn volume_backups(pool: &str, volume: &str) -> String {
    format!(
        "{}/backups",
        super::storage::custom_volume_url(pool, volume)
    )
}

/// The body of `POST /1.0/instances/{name}/backups` (`InstanceBackupsPost`): everything
/// (snapshots too), as plain files, uncompressed.
#[derive(Debug, Serialize)]
pub struct InstanceBackupsPost {
    pub name: String,
    pub instance_only: bool,
    pub optimized_storage: bool,
    pub compression_algorithm: String,
}

/// The body of `POST .../volumes/custom/{name}/backups` (`StoragePoolVolumeBackupsPost`), as
/// [`InstanceBackupsPost`].
#[derive(Debug, Serialize)]
pub struct StoragePoolVolumeBackupsPost {
    pub name: String,
    pub volume_only: bool,
    pub optimized_storage: bool,
    pub compression_algorithm: String,
}

impl Lxd {
    /// `POST /1.0/instances/{name}/backups`: writes the backup `backup` of the (stopped)
    /// instance, with its snapshots.
    pub async fn create_instance_backup(
        &self,
        instance: &str,
        backup: &str,
    ) -> Result<(), LxdError> {
        let body = InstanceBackupsPost {
            name: backup.into(),
            instance_only: false,
            optimized_storage: false,
            compression_algorithm: "none".into(),
        };
        self.call_within(
            Method::POST,
            &instance_backups(instance),
            Some(&to_json(&body)),
            BACKUP_TIMEOUT,
        )
        .await
        .map(|_| ())
    }

    /// `GET /1.0/instances/{name}/backups/{backup}/export`: the tarball, unread.
    pub async fn export_instance_backup(
        &self,
        instance: &str,
        backup: &str,
    ) -> Result<RawStream, LxdError> {
        let path = format!("{}/{}/export", instance_backups(instance), encode(backup));
        self.get_stream(&path).await
    }

    /// `DELETE /1.0/instances/{name}/backups/{backup}`; absent is fine.
    pub async fn delete_instance_backup(
        &self,
        instance: &str,
        backup: &str,
    ) -> Result<(), LxdError> {
        let path = format!("{}/{}", instance_backups(instance), encode(backup));
        match self.call(Method::DELETE, &path, None).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// `POST /1.0/instances` with the tarball as its body: the instance as it was exported,
    /// named `name`, its root disk on `pool`.
    pub async fn import_instance_backup(
        &self,
        name: &str,
        pool: &str,
        tarball: LxdBody,
    ) -> Result<(), LxdError> {
        let headers = [
            ("Content-Type", "application/octet-stream".to_string()),
            ("X-LXD-name", name.to_string()),
            ("X-LXD-pool", pool.to_string()),
        ];
        self.post_stream("/1.0/instances", &headers, tarball, BACKUP_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `POST .../volumes/custom/{name}/backups`: writes the backup `backup` of the volume, with
    /// its snapshots (a move) or, `volume_only`, only its files as they are now (an archive).
    pub async fn create_volume_backup(
        &self,
        pool: &str,
        volume: &str,
        backup: &str,
        volume_only: bool,
    ) -> Result<(), LxdError> {
        let body = StoragePoolVolumeBackupsPost {
            name: backup.into(),
            volume_only,
            optimized_storage: false,
            compression_algorithm: "none".into(),
        };
        self.call_within(
            Method::POST,
            &volume_backups(pool, volume),
            Some(&to_json(&body)),
            BACKUP_TIMEOUT,
        )
        .await
        .map(|_| ())
    }

    /// `GET .../volumes/custom/{name}/backups/{backup}/export`: the tarball, unread.
    pub async fn export_volume_backup(
        &self,
        pool: &str,
        volume: &str,
        backup: &str,
    ) -> Result<RawStream, LxdError> {
        let path = format!("{}/{}/export", volume_backups(pool, volume), encode(backup));
        self.get_stream(&path).await
    }

    /// `DELETE .../volumes/custom/{name}/backups/{backup}`; absent is fine.
    pub async fn delete_volume_backup(
        &self,
        pool: &str,
        volume: &str,
        backup: &str,
    ) -> Result<(), LxdError> {
        let path = format!("{}/{}", volume_backups(pool, volume), encode(backup));
        match self.call(Method::DELETE, &path, None).await {
            Err(e) if !e.is_not_found() => Err(e),
            _ => Ok(()),
        }
    }

    /// `POST /1.0/storage-pools/{pool}/volumes/custom` with the tarball as its body: the volume
    /// as it was exported, named `name`.
    pub async fn import_volume_backup(
        &self,
        pool: &str,
        name: &str,
        tarball: LxdBody,
    ) -> Result<(), LxdError> {
        let headers = [
            ("Content-Type", "application/octet-stream".to_string()),
            ("X-LXD-name", name.to_string()),
        ];
        let path = format!("{}/volumes/custom", super::storage::pool_url(pool));
        self.post_stream(&path, &headers, tarball, BACKUP_TIMEOUT)
            .await
            .map(|_| ())
    }
}
