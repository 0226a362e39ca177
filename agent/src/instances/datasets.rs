//! Course datasets on this node: each version is one custom volume (`dataset-<hex>`) of the
//! daemon, made once from the controller's data store and mounted by every container of the
//! course at `/data/<name>`.
//!
//! A volume is made from the dataset's tar by streaming it, re-rooted under `backup/volume/`
//! behind an `index.yaml`, into the daemon's custom-volume backup import: the daemon unpacks
//! it, nothing is written into its pool by hand. The tarball is fetched to disk and its SHA-256
//! checked before the daemon sees a byte, as images are.
//!
//! Students' containers each have their own isolated idmap, and a custom volume attached by pool
//! is shifted on disk to one container's map (LXD 5.0 refuses idmapped mounts on these pools,
//! measured: "Required idmapping abilities not available"), so a second student could not
//! attach it. Students therefore mount the volume's directory in the pool (a host path, read
//! only: EROFS inside, and locked, so root in the container cannot remount it): its files are
//! readable to all, owned by no one they know. Staff attach it by pool, read-write: the
//! daemon shifts it to their container's map. A new version is a new volume: the device's
//! source changes in one `PATCH`, so a running container sees the new data without a restart.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use cohort_proto::agent::{ImportDataset, InstanceDatasets, PruneDatasets};

use super::{InstanceError, Instances};
use crate::lxd::instances::InstancePut;
use crate::lxd::{file_body, Devices};

/// Prefix of the custom volumes holding datasets (the controller's `dataset_volume`).
pub const DATASET_PREFIX: &str = "dataset-";
/// Prefix of the disk devices that mount them.
pub const DEVICE_DATA_PREFIX: &str = "cohort-data-";

fn internal(e: impl std::fmt::Display) -> InstanceError {
    InstanceError::Internal(e.to_string())
}

fn check_volume(volume: &str) -> Result<(), InstanceError> {
    let hex = volume.strip_prefix(DATASET_PREFIX).unwrap_or("");
    if hex.len() < 16 || hex.len() > 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(InstanceError::invalid(
            "volume",
            format!("{volume:?} is not a dataset volume ({DATASET_PREFIX}<hex>)"),
        ));
    }
    Ok(())
}

fn check_dataset_name(name: &str) -> Result<(), InstanceError> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(InstanceError::invalid(
            "mounts.name",
            format!("{name:?} is not a dataset name"),
        ))
    }
}

impl Instances {
    /// Where the daemon keeps custom volume `volume` of this agent's project in its pool (a
    /// project without volumes of its own keeps them in `default`).
    fn volume_dir(&self, volume: &str) -> PathBuf {
        let custom = self.config.pool_path().join("custom");
        let own = custom.join(format!("{}_{volume}", self.config.lxd_project));
        if own.exists() {
            own
        } else {
            custom.join(format!("default_{volume}"))
        }
    }

    /// `POST /v1/datasets`: makes the dataset's volume unless it is here. One import at a time:
    /// a class's creates on a node all ask for the course's datasets at once, and only the first
    /// may fetch; the others find the volume made.
    pub async fn import_dataset(&self, req: &ImportDataset) -> Result<(), InstanceError> {
        static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        check_volume(&req.volume)?;
        let _turn = TURN.lock().await;
        let pool = self.config.storage_pool.clone();
        match self.lxd.get_custom_volume(&pool, &req.volume).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        let dir = self.config.state_dir.join("datasets");
        std::fs::create_dir_all(&dir).map_err(internal)?;
        let id = uuid::Uuid::new_v4();
        let download = dir.join(format!("{id}.partial"));
        let backup = dir.join(format!("{id}.backup.partial"));
        let result = self.fetch_and_import(req, &download, &backup).await;
        let _ = std::fs::remove_file(&download);
        let _ = std::fs::remove_file(&backup);
        result
    }

    async fn fetch_and_import(
        &self,
        req: &ImportDataset,
        download: &Path,
        backup: &Path,
    ) -> Result<(), InstanceError> {
        let fetch_failed = |message: String| {
            InstanceError::Internal(format!("downloading {}: {message}", req.url))
        };
        let client = self.images.controller_client().map_err(fetch_failed)?;
        let got = crate::images::download_to(&client, &req.url, download)
            .await
            .map_err(fetch_failed)?;
        if !got.eq_ignore_ascii_case(&req.sha256) {
            return Err(InstanceError::invalid(
                "sha256",
                format!("the dataset's SHA-256 is {got}, not {}", req.sha256),
            ));
        }
        let (from, to, volume) = (
            download.to_path_buf(),
            backup.to_path_buf(),
            req.volume.clone(),
        );
        let pool = self.config.storage_pool.clone();
        tokio::task::spawn_blocking(move || rewrap(&from, &to, &volume, &pool))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        let file = tokio::fs::File::open(backup).await.map_err(internal)?;
        let pool = self.config.storage_pool.clone();
        self.lxd
            .import_volume_backup(&pool, &req.volume, file_body(file))
            .await?;
        // The daemon makes a volume's root 0711: students (not its owner) must list it.
        let root = self.volume_dir(&req.volume);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
            .map_err(internal)?;
        tracing::info!(volume = %req.volume, "dataset volume made");
        Ok(())
    }

    /// `PUT /v1/instances/{name}/datasets`: the instance's `cohort-data-*` devices become
    /// exactly `req.mounts`, in one change the daemon applies live.
    pub async fn set_datasets(
        &self,
        name: &str,
        req: &InstanceDatasets,
    ) -> Result<(), InstanceError> {
        super::check_name(name)?;
        let mut wanted = Devices::new();
        for mount in &req.mounts {
            check_dataset_name(&mount.name)?;
            check_volume(&mount.volume)?;
            let mut dev: BTreeMap<String, String> = [
                ("type".to_string(), "disk".to_string()),
                ("path".to_string(), format!("/data/{}", mount.name)),
            ]
            .into();
            if mount.writable {
                dev.insert("pool".into(), self.config.storage_pool.clone());
                dev.insert("source".into(), mount.volume.clone());
            } else {
                let dir = self.volume_dir(&mount.volume);
                if !dir.is_dir() {
                    return Err(InstanceError::NotFound {
                        field: Some("mounts.volume".into()),
                        message: format!(
                            "dataset volume {} has no directory in pool {} ({}): datasets need a dir or btrfs pool",
                            mount.volume,
                            self.config.storage_pool,
                            dir.display()
                        ),
                    });
                }
                dev.insert("source".into(), dir.display().to_string());
                dev.insert("readonly".into(), "true".into());
            }
            wanted.insert(format!("{DEVICE_DATA_PREFIX}{}", mount.name), dev);
        }
        let (current, etag) = match self.lxd.get_instance_current(name).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        let mut devices = current.devices();
        let before: Devices = devices
            .iter()
            .filter(|(dev, _)| dev.starts_with(DEVICE_DATA_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if before == wanted {
            return Ok(());
        }
        devices.retain(|dev, _| !dev.starts_with(DEVICE_DATA_PREFIX));
        devices.extend(wanted);
        let body = InstancePut::replacing(&current, current.config(), devices);
        self.lxd
            .update_instance(name, &body, etag.as_deref())
            .await?;
        tracing::info!(instance = %name, mounts = req.mounts.len(), "datasets mounted");
        Ok(())
    }

    /// `POST /v1/datasets/prune`: deletes the dataset volumes not kept that no instance of the
    /// project mounts (by pool or by its directory); the names deleted.
    pub async fn prune_datasets(&self, req: &PruneDatasets) -> Result<Vec<String>, InstanceError> {
        let pool = self.config.storage_pool.clone();
        let names = self.lxd.get_custom_volume_names(&pool).await?;
        let instances = self.lxd.get_instances().await?;
        let mut deleted = Vec::new();
        for volume in names {
            if !volume.starts_with(DATASET_PREFIX) || req.keep.contains(&volume) {
                continue;
            }
            let dir = self.volume_dir(&volume).display().to_string();
            let mounted = instances.iter().any(|i| {
                i.devices
                    .values()
                    .any(|dev| dev.get("source").is_some_and(|s| *s == volume || *s == dir))
            });
            if mounted {
                continue;
            }
            match self.lxd.delete_custom_volume(&pool, &volume).await {
                Ok(()) => deleted.push(volume),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !deleted.is_empty() {
            tracing::info!(?deleted, "dataset volumes no container uses deleted");
        }
        Ok(deleted)
    }
}

/// Writes `to`: the daemon's custom-volume backup of the dataset tar `from` (its entries under
/// `backup/volume/`, an `index.yaml` first). Entry by entry, never whole in memory.
fn rewrap(from: &Path, to: &Path, volume: &str, pool: &str) -> std::io::Result<()> {
    let mut out = tar::Builder::new(std::io::BufWriter::new(std::fs::File::create(to)?));
    out.follow_symlinks(false);
    let index = format!(
        "name: {volume}\nbackend: dir\npool: {pool}\noptimized: false\ntype: custom\nconfig:\n  volume:\n    name: {volume}\n    type: custom\n    content_type: filesystem\n    config: {{}}\n"
    );
    let mut header = tar::Header::new_gnu();
    header.set_size(index.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    out.append_data(&mut header, "backup/index.yaml", index.as_bytes())?;
    let mut root = tar::Header::new_gnu();
    root.set_entry_type(tar::EntryType::Directory);
    root.set_mode(0o755);
    root.set_size(0);
    out.append_data(&mut root, "backup/volume/", std::io::empty())?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(std::fs::File::open(from)?));
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let inner: PathBuf = path
            .components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .collect();
        if inner.as_os_str().is_empty() {
            continue;
        }
        let target = Path::new("backup/volume").join(&inner);
        let mut header = entry.header().clone();
        match header.entry_type() {
            tar::EntryType::Symlink => {
                let link = entry.link_name()?.unwrap_or_default().into_owned();
                out.append_link(&mut header, &target, &link)?;
            }
            tar::EntryType::Link => {
                let link = entry.link_name()?.unwrap_or_default().into_owned();
                let link: PathBuf = link
                    .components()
                    .filter(|c| matches!(c, std::path::Component::Normal(_)))
                    .collect();
                out.append_link(&mut header, &target, Path::new("backup/volume").join(link))?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::Directory => {
                out.append_data(&mut header, &target, &mut entry as &mut dyn Read)?;
            }
            // The controller refused anything else at push.
            _ => {}
        }
    }
    out.into_inner()?.flush()
}
