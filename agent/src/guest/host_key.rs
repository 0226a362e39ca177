//! Each container's SSH host key, made by the agent and written into the container before its
//! first boot.
//!
//! The image makes host keys on first boot (`ssh-keygen -A`: RSA, ECDSA and Ed25519) unless an
//! Ed25519 key is already there. The agent writes one instead: an Ed25519 key made in-process
//! (microseconds, against a fraction of a second of CPU per container for the RSA key, which a
//! class booting at once on a small node pays thirty times over) and an sshd drop-in that serves
//! only it. Its public half is recorded in the instance's config, so the controller can hand
//! students a `known_hosts` line and their first login verifies the host instead of trusting it.
//! A container copied from a template that had been booted gets its own key the same way,
//! rather than every copy serving the template's.

use crate::lxd::instances::InstancePut;
use bytes::Bytes;
use ssh_key::{Algorithm, LineEnding, PrivateKey};

use crate::idmap::rootfs::{self, RootFile};
use crate::instances::{InstanceError, Instances, LxdInstance, KEY_SSH_HOST_KEY};

/// Where sshd reads the key, and the drop-in that makes it the only one served.
const KEY_PATH: &str = "/etc/ssh/ssh_host_ed25519_key";
const PUBLIC_PATH: &str = "/etc/ssh/ssh_host_ed25519_key.pub";
const DROP_IN_PATH: &str = "/etc/ssh/sshd_config.d/cohort-host-key.conf";
const DROP_IN: &str =
    "# Written by Cohort's agent: this container's own key, made before its first boot.\n\
HostKey /etc/ssh/ssh_host_ed25519_key\n";

/// A freshly made host key: the private half in OpenSSH's format and the public half as a
/// `known_hosts` key (`ssh-ed25519 AAAA... root@name`).
pub(crate) struct HostKey {
    private: String,
    pub public: String,
}

impl HostKey {
    pub fn generate(instance: &str) -> Result<HostKey, InstanceError> {
        let mut key = PrivateKey::random(&mut rand::rngs::OsRng, Algorithm::Ed25519)
            .map_err(|e| InstanceError::Internal(format!("making an SSH host key: {e}")))?;
        key.set_comment(format!("root@{instance}"));
        let private = key
            .to_openssh(LineEnding::LF)
            .map_err(|e| InstanceError::Internal(format!("encoding an SSH host key: {e}")))?
            .to_string();
        let public = key
            .public_key()
            .to_openssh()
            .map_err(|e| InstanceError::Internal(format!("encoding an SSH host key: {e}")))?;
        Ok(HostKey { private, public })
    }
}

impl HostKey {
    /// The three files: the key, its public half and the drop-in.
    fn files(&self) -> [RootFile<'static>; 3] {
        [
            RootFile {
                path: KEY_PATH,
                content: self.private.clone().into_bytes(),
                mode: 0o600,
            },
            RootFile {
                path: PUBLIC_PATH,
                content: format!("{}\n", self.public).into_bytes(),
                mode: 0o644,
            },
            RootFile {
                path: DROP_IN_PATH,
                content: DROP_IN.as_bytes().to_vec(),
                mode: 0o644,
            },
        ]
    }
}

impl Instances {
    /// Writes the key and the drop-in into the (stopped) container, owned by its root: straight
    /// into its root filesystem where that is on this host (see `idmap::rootfs`), otherwise, or where
    /// the tree is not as an image makes it, through LXD's file API, one file at a time (calls
    /// at once to one stopped instance meet LXD's helper race the more; see `instances::files`).
    pub(crate) async fn install_host_key(
        &self,
        name: &str,
        key: &HostKey,
    ) -> Result<(), InstanceError> {
        let files = key.files();
        let to_write = files.clone();
        let written = self
            .on_host(name, "writing the host key", move |rootfs| {
                rootfs::write_files(rootfs, &to_write)
            })
            .await;
        if written.is_some() {
            return Ok(());
        }
        for file in files {
            let content = Bytes::from(file.content);
            self.push_file(name, file.path, content, file.mode, 0, 0)
                .await?;
        }
        Ok(())
    }

    /// The public half of the key in the (stopped) container, where `install_host_key` wrote
    /// it; `None` when there is none.
    async fn installed_public_key(&self, name: &str) -> Result<Option<String>, InstanceError> {
        let read = self
            .on_host(name, "reading the host key", |rootfs| {
                rootfs::read_file(rootfs, PUBLIC_PATH)
            })
            .await;
        if let Some(bytes) = read {
            return Ok(bytes.map(|b| String::from_utf8_lossy(&b).trim().to_string()));
        }
        match self.pull_file(name, PUBLIC_PATH).await {
            Ok(file) => Ok(Some(
                String::from_utf8_lossy(&file.bytes).trim().to_string(),
            )),
            Err(InstanceError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Runs `f` on the stopped container's root filesystem where it is on this host (see
    /// `idmap::rootfs`), off the async runtime; `None`, logged as `what` going through LXD instead,
    /// where it is not or `f` failed.
    pub(crate) async fn on_host<T, F>(&self, name: &str, what: &str, f: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce(&std::path::Path) -> Result<T, rootfs::RootfsError> + Send + 'static,
    {
        if !self.rootfs_on_host() {
            return None;
        }
        let rootfs = self.idmap.rootfs(name);
        match tokio::task::spawn_blocking(move || f(&rootfs)).await {
            Ok(Ok(done)) => Some(done),
            Ok(Err(e)) => {
                tracing::info!(instance = name, error = %e, "{what} through LXD instead");
                None
            }
            Err(e) => {
                tracing::warn!(instance = name, error = %e, "{what} through LXD instead");
                None
            }
        }
    }

    /// Before the first start of an instance an earlier request made (and maybe died before
    /// starting): keeps the key it wrote when the container holds the one its config records,
    /// and otherwise writes a new one and records that.
    pub(crate) async fn ensure_host_key(&self, lx: &LxdInstance) -> Result<(), InstanceError> {
        if let Some(recorded) = lx.config.get(KEY_SSH_HOST_KEY) {
            if self.installed_public_key(&lx.name).await?.as_deref() == Some(recorded.as_str()) {
                return Ok(());
            }
        }
        let key = HostKey::generate(&lx.name)?;
        self.install_host_key(&lx.name, &key).await?;
        let patch = InstancePut::config([(KEY_SSH_HOST_KEY.into(), key.public)].into());
        self.lxd.patch_instance(&lx.name, &patch).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_ed25519_and_its_halves_match() {
        let key = HostKey::generate("alice").unwrap();
        let private = PrivateKey::from_openssh(&key.private).unwrap();
        assert_eq!(private.algorithm(), Algorithm::Ed25519);
        assert!(key.public.starts_with("ssh-ed25519 "), "{}", key.public);
        assert!(key.public.ends_with(" root@alice"), "{}", key.public);
        let public = ssh_key::PublicKey::from_openssh(&key.public).unwrap();
        assert_eq!(&public.key_data(), &private.public_key().key_data());
        let other = HostKey::generate("alice").unwrap();
        assert_ne!(other.public, key.public, "every container gets its own key");
    }
}
