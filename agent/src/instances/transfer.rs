//! A container and its home volume leaving this node or arriving at it, as LXD backups: the
//! stopped container (snapshots included) or the volume is written as a backup, its tarball is
//! streamed out to the controller, which streams it into the other node's agent, whose LXD
//! imports it. Nothing is held whole in memory on either side. The backup on the leaving side
//! is deleted once its tarball has been read (or the reading given up).

use std::time::Duration;

use http_body_util::BodyExt;

use crate::lxd::instances::InstancePut;

use super::volumes::HOME_PREFIX;
use super::Instances;
use super::{InstanceError, DEVICE_SSH};
use crate::lxd::{Lxd, LxdBody, RawStream};
use crate::network::{device, DEVICE_NIC, KEY_ADDRESS};

/// The name of the backup a move writes (one at a time per instance or volume; an earlier
/// attempt's is replaced).
const MOVE_BACKUP: &str = "cohort-move";
/// Longest a tarball may take to arrive in full.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(3600);

/// A backup's tarball on its way out, and the backup it came from, deleted once the tarball
/// is dropped (read to its end, or the controller gone).
pub struct Export {
    pub tarball: RawStream,
    pub cleanup: BackupCleanup,
}

/// Deletes a backup (a move's, an archive's) when dropped.
pub struct BackupCleanup {
    lxd: Lxd,
    pool: Option<String>,
    owner: String,
    backup: &'static str,
}

impl Drop for BackupCleanup {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (lxd, pool, owner, backup) = (
            self.lxd.clone(),
            self.pool.take(),
            self.owner.clone(),
            self.backup,
        );
        runtime.spawn(async move {
            let deleted = match &pool {
                Some(pool) => lxd.delete_volume_backup(pool, &owner, backup).await,
                None => lxd.delete_instance_backup(&owner, backup).await,
            };
            if let Err(e) = deleted {
                tracing::warn!(of = %owner, %backup, error = %e, "cannot delete a backup");
            }
        });
    }
}

/// A request's body handed to LXD as it arrives.
pub fn streamed(body: hyper::body::Incoming) -> LxdBody {
    body.map_err(std::io::Error::other).boxed()
}

/// Checks that `name` is a Cohort home volume, the only volumes that are moved (`done`: "move
/// between nodes") or archived ("are archived").
pub(super) fn home_name(name: &str, done: &str) -> Result<(), InstanceError> {
    cohort_proto::validate::instance_name(name)
        .map_err(|e| InstanceError::invalid("name", e.0.replace("instance", "volume")))?;
    if !name.starts_with(HOME_PREFIX) {
        return Err(InstanceError::invalid(
            "name",
            format!("only Cohort home volumes ({HOME_PREFIX}*) {done}"),
        ));
    }
    Ok(())
}

impl Instances {
    /// `POST /v1/instances/{name}/export`: the stopped instance's backup tarball. A running
    /// one is refused (409): its files would change under the export.
    pub async fn export_instance(&self, name: &str) -> Result<Export, InstanceError> {
        let lx = self
            .lxd_instance(name)
            .await?
            .ok_or_else(|| InstanceError::NotFound {
                field: None,
                message: format!("instance {name} not found"),
            })?;
        if lx.status != "Stopped" {
            return Err(InstanceError::Conflict(format!(
                "instance {name} is {}; stop it before it is exported",
                lx.status
            )));
        }
        self.leave_node_network(name).await?;
        self.lxd.delete_instance_backup(name, MOVE_BACKUP).await?;
        self.lxd.create_instance_backup(name, MOVE_BACKUP).await?;
        let cleanup = BackupCleanup {
            lxd: self.lxd.clone(),
            pool: None,
            owner: name.to_string(),
            backup: MOVE_BACKUP,
        };
        let tarball = self.lxd.export_instance_backup(name, MOVE_BACKUP).await?;
        Ok(Export { tarball, cleanup })
    }

    /// Before an export: the NIC goes, and the SSH forward becomes the classic one on the same
    /// address and port. The NIC's address is this node's network's, and another node's LXD
    /// refuses to import a container whose static address one of its own holds. A container
    /// that starts here again (a move undone) gets a NIC and its NAT forward back on that start
    /// (`ensure_nic`), as one made before the network does.
    async fn leave_node_network(&self, name: &str) -> Result<(), InstanceError> {
        let (current, etag) = self.lxd.get_instance_current(name).await?;
        let mut devices = current.devices();
        if devices.remove(DEVICE_NIC).is_none() {
            return Ok(());
        }
        let listen = devices
            .get(DEVICE_SSH)
            .and_then(|d| d.get("listen"))
            .cloned();
        if let Some(listen) = listen {
            devices.insert(
                DEVICE_SSH.into(),
                device([
                    ("type", "proxy".into()),
                    ("bind", "host".into()),
                    ("listen", listen),
                    ("connect", "tcp:127.0.0.1:22".into()),
                ]),
            );
        }
        let mut config = current.config();
        config.remove(KEY_ADDRESS);
        let body = InstancePut::replacing(&current, config, devices);
        self.lxd
            .update_instance(name, &body, etag.as_deref())
            .await?;
        self.network.rebuild_firewall().await;
        Ok(())
    }

    /// `POST /v1/instances/{name}/import`: the instance from another node's backup, its root
    /// disk on this node's pool; stopped, and not yet this node's (see `arrival`). One that
    /// exists already is refused (409): the controller deletes what a failed try left first.
    pub async fn import_instance(&self, name: &str, tarball: LxdBody) -> Result<(), InstanceError> {
        super::check_name(name)?;
        if self.lxd_instance(name).await?.is_some() {
            return Err(InstanceError::Conflict(format!(
                "instance {name} already exists on this node"
            )));
        }
        let imported = tokio::time::timeout(
            IMPORT_TIMEOUT,
            self.lxd
                .import_instance_backup(name, &self.config.storage_pool, tarball),
        )
        .await
        .map_err(|_| InstanceError::Internal(format!("importing {name} took over an hour")))?;
        imported?;
        tracing::info!(instance = name, "instance imported from a backup");
        Ok(())
    }

    /// `POST /v1/volumes/{name}/export`: a home volume's backup tarball.
    pub async fn export_volume(&self, name: &str) -> Result<Export, InstanceError> {
        home_name(name, "move between nodes")?;
        let (tarball, cleanup) = self.volume_backup(name, MOVE_BACKUP, false).await?;
        Ok(Export { tarball, cleanup })
    }

    /// Has the daemon write backup `backup` of home volume `name` (`volume_only`: without its
    /// snapshots) and returns its tarball, unread, with the guard that deletes it afterwards.
    pub(super) async fn volume_backup(
        &self,
        name: &str,
        backup: &'static str,
        volume_only: bool,
    ) -> Result<(RawStream, BackupCleanup), InstanceError> {
        let pool = self.config.storage_pool.clone();
        self.lxd.delete_volume_backup(&pool, name, backup).await?;
        match self
            .lxd
            .create_volume_backup(&pool, name, backup, volume_only)
            .await
        {
            Err(e) if e.is_not_found() => {
                return Err(InstanceError::NotFound {
                    field: None,
                    message: format!("volume {name} not found"),
                })
            }
            other => other?,
        }
        let cleanup = BackupCleanup {
            lxd: self.lxd.clone(),
            pool: Some(pool.clone()),
            owner: name.to_string(),
            backup,
        };
        let tarball = self.lxd.export_volume_backup(&pool, name, backup).await?;
        Ok((tarball, cleanup))
    }

    /// `POST /v1/volumes/{name}/import`: a home volume from another node's backup. One that
    /// exists already is refused (409).
    pub async fn import_volume(&self, name: &str, tarball: LxdBody) -> Result<(), InstanceError> {
        home_name(name, "move between nodes")?;
        let pool = self.config.storage_pool.clone();
        match self.lxd.get_custom_volume(&pool, name).await {
            Ok(_) => {
                return Err(InstanceError::Conflict(format!(
                    "volume {name} already exists on this node"
                )))
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        let imported = tokio::time::timeout(
            IMPORT_TIMEOUT,
            self.lxd.import_volume_backup(&pool, name, tarball),
        )
        .await
        .map_err(|_| InstanceError::Internal(format!("importing {name} took over an hour")))?;
        imported?;
        tracing::info!(volume = name, "home volume imported from a backup");
        Ok(())
    }
}
