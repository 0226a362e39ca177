//! One path of a home snapshot copied back into the running container, at
//! `~/restored/<snapshot>/<path>` (`POST /v1/instances/{name}/home/restore-path`).
//!
//! Reading: the snapshot is read where the daemon keeps it, under the pool's directory
//! (`storage-pools/<pool>/custom-snapshots/<project>_<volume>/<snapshot>`). LXD 5.0 and
//! Incus 6.0 lay a `dir` or `btrfs` pool out the same way, and the snapshot there is read-only
//! and out of every container's reach, so what is checked on it stays true while it is read.
//! No copy of the volume is made and the container is not stopped (the whole restore must stop
//! it). A pool whose driver keeps snapshots elsewhere (zfs, lvm, ceph) is answered 409 before
//! anything is read ([`check_readable_snapshots`]).
//!
//! Writing: everything in the home is done by the home's owner, never by root: the path is
//! sent as a tarball (links as links, modes kept, never followed), pushed into a directory of
//! root's outside the home ([`TARBALL_DIR`]: in the home the student could swap the file for a
//! link while the daemon writes and chowns it by name), then a shell run as the home's owner
//! unpacks it into a staging directory of the home and moves it into place. So the copy is the owner's, with their ids, and a link the
//! student made in their own home can lead the copy nowhere they could not write themselves.
//! Nothing appears in `~/restored` until the copy is whole.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use cohort_proto::agent::RestoreHomePath;
use tokio::sync::mpsc;

use super::{InstanceError, Instances};
use crate::lxd::daemon::FileHeader;
use crate::lxd::LxdBody;

/// The longest the push and the unpacking may each take (a large directory); both together
/// stay under the controller's wait for a streaming call (`COHORT_NODE_TRANSFER_TIMEOUT_S`).
const COPY_TIMEOUT: Duration = Duration::from_secs(1500);
/// Chunks of the tarball in flight between the reading thread and the daemon.
const CHANNEL_CHUNKS: usize = 8;

/// Where the tarball waits in the container: root's (under `/var/lib`), so only root and the
/// daemon can name what is there; the tarball itself is the owner's, 0600, for them to read.
const TARBALL_DIR: &str = "/var/lib/cohort-restore";

/// Run as the home's owner: `$1` the home, `$2` the pushed tarball, `$3` the snapshot, `$4` the
/// path. The agent removes the tarball after, whatever happened.
const UNPACK: &str = r#"set -eu
home=$1 tarball=$2 snap=$3 rel=$4
exec 0<"$tarball"
stage=$(mktemp -d "$home/.cohort-restore-XXXXXX")
trap 'rm -rf "$stage"' EXIT
tar -x -p -f - -C "$stage"
dest="$home/restored/$snap/$rel"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest"
mv "$stage/$rel" "$dest"
"#;

/// Bytes written on the reading thread, sent on as chunks of the push's body.
struct ChunkWriter(mpsc::Sender<io::Result<Bytes>>);

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the push stopped reading"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Refuses (409) a pool whose driver does not keep a volume's snapshots as a tree the agent can
/// read under the pool's directory. `dir` copies the files there and `btrfs` keeps a read-only
/// subvolume there, both always present; `zfs` keeps a snapshot as `dataset@snapshot`, `lvm` and
/// `ceph` as a block device, each mounted by the daemon only while it uses it, so what is found
/// there is at best an empty mount point and would read as a home without the path.
pub fn check_readable_snapshots(driver: &str) -> Result<(), InstanceError> {
    match driver {
        "dir" | "btrfs" => Ok(()),
        other => Err(InstanceError::Conflict(format!(
            "this node's storage pool uses the {other} driver, which keeps home snapshots where \
             one path cannot be copied out of them; restore the whole home instead"
        ))),
    }
}

/// Checks `rel` inside the snapshot at `root`: every part before the last a directory (not a
/// link), the last present (a link there is copied as a link, never followed).
pub fn check_in_snapshot(root: &Path, rel: &str) -> Result<PathBuf, InstanceError> {
    let parts: Vec<&str> = rel.split('/').collect();
    let mut at = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let shown = parts[..=i].join("/");
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(InstanceError::NotFound {
                    field: Some("path".into()),
                    message: format!("{shown} is not in the snapshot"),
                })
            }
            Err(e) => {
                return Err(InstanceError::Internal(format!(
                    "reading the snapshot: {e}"
                )))
            }
        };
        if i + 1 == parts.len() {
            break;
        }
        if meta.file_type().is_symlink() {
            return Err(InstanceError::invalid(
                "path",
                format!("{shown} is a link in the snapshot; name the path it leads to"),
            ));
        }
        if !meta.is_dir() {
            return Err(InstanceError::NotFound {
                field: Some("path".into()),
                message: format!("{shown} is not a directory in the snapshot"),
            });
        }
    }
    Ok(at)
}

/// Writes `src` (a file, link or directory, never followed) into a tarball named `rel`.
fn tar_path(src: &Path, rel: &str, out: impl Write) -> io::Result<()> {
    let mut tar = tar::Builder::new(io::BufWriter::with_capacity(256 * 1024, out));
    tar.follow_symlinks(false);
    if std::fs::symlink_metadata(src)?.is_dir() {
        tar.append_dir_all(rel, src)?;
    } else {
        tar.append_path_with_name(src, rel)?;
    }
    tar.into_inner()?.flush()
}

impl Instances {
    /// Where the daemon keeps the snapshot's files on this host.
    async fn snapshot_dir(&self, volume: &str, snapshot: &str) -> Result<PathBuf, InstanceError> {
        let project = self.lxd.project().to_string();
        // A project without volumes of its own keeps them in `default`.
        let own = match self.lxd.get_project(&project).await {
            Ok(p) => p.config.get("features.storage.volumes").map(String::as_str) != Some("false"),
            Err(_) => true,
        };
        let owner = if own { project.as_str() } else { "default" };
        Ok(self
            .config
            .pool_path()
            .join("custom-snapshots")
            .join(format!("{owner}_{volume}"))
            .join(snapshot))
    }

    /// `POST /v1/instances/{name}/home/restore-path` (see the module).
    pub async fn restore_home_path(
        &self,
        name: &str,
        req: &RestoreHomePath,
    ) -> Result<(), InstanceError> {
        super::check_name(name)?;
        super::home_snapshots::check_home(&req.volume)?;
        super::snapshots::check_snapshot_name(&req.snapshot).map_err(|_| {
            InstanceError::invalid(
                "snapshot",
                "not a snapshot name (a-z, A-Z, 0-9, '-', '_', '.')",
            )
        })?;
        cohort_proto::validate::home_relative_path(&req.path)
            .map_err(|e| InstanceError::invalid("path", e.0))?;
        let rel = req.path.trim_end_matches('/').to_string();
        let instance = self
            .lxd_instance(name)
            .await?
            .ok_or_else(|| InstanceError::NotFound {
                field: None,
                message: format!("instance {name} not found"),
            })?;
        let home = instance
            .devices
            .values()
            .find(|d| {
                d.get("type").map(String::as_str) == Some("disk")
                    && d.get("source") == Some(&req.volume)
            })
            .and_then(|d| d.get("path").cloned())
            .ok_or_else(|| InstanceError::NotFound {
                field: None,
                message: format!("{name} does not mount {}", req.volume),
            })?;
        check_readable_snapshots(self.storage_driver())?;
        let root = self.snapshot_dir(&req.volume, &req.snapshot).await?;
        if !root.is_dir() {
            let listed = self.home_snapshots(&req.volume).await?;
            return Err(if listed.iter().any(|s| s.name == req.snapshot) {
                InstanceError::Conflict(format!(
                    "this node's pool keeps snapshots where they cannot be read ({} is not \
                     a directory); restore the whole home instead",
                    root.display()
                ))
            } else {
                InstanceError::NotFound {
                    field: Some("snapshot".into()),
                    message: format!("volume {} has no snapshot {}", req.volume, req.snapshot),
                }
            });
        }
        let src = check_in_snapshot(&root, &rel)?;
        if instance.status != "Running" {
            return Err(InstanceError::Conflict(format!(
                "{name} is not running; start it to restore a path into its home"
            )));
        }
        if req.check {
            return Ok(());
        }
        let (uid, gid) = self.path_owner(name, &home).await?;
        self.push_directory(name, TARBALL_DIR).await?;
        let tarball = format!("{TARBALL_DIR}/{}.tar", uuid::Uuid::new_v4());
        let pushed = self
            .push_tarball(name, &tarball, &src, &rel, uid, gid)
            .await;
        let body = crate::lxd::instance_exec::InstanceExecPost {
            user: Some(uid),
            group: Some(gid),
            cwd: Some(home.clone()),
            ..crate::lxd::instance_exec::InstanceExecPost::recorded(
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    UNPACK.into(),
                    "cohort-restore".into(),
                    home,
                    tarball.clone(),
                    req.snapshot.clone(),
                    rel,
                ],
                Default::default(),
            )
        };
        let out = match pushed {
            Ok(()) => self.exec_body(name, &body, COPY_TIMEOUT).await,
            Err(e) => Err(e),
        };
        let rm = vec!["rm".into(), "-f".into(), tarball];
        if let Err(e) = self.run_command(name, rm, Duration::from_secs(60)).await {
            tracing::info!(instance = name, "a restore's tarball not removed: {e}");
        }
        match out {
            Ok(out) if out.exit_code == 0 => Ok(()),
            Ok(out) => Err(InstanceError::Conflict(format!(
                "copying into {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))),
            Err(e) => Err(e),
        }
    }

    /// Streams `src` as a tarball into the file `path` of `name`, owned by `uid`:`gid`, 0600.
    async fn push_tarball(
        &self,
        name: &str,
        path: &str,
        src: &Path,
        rel: &str,
        uid: u32,
        gid: u32,
    ) -> Result<(), InstanceError> {
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let (src, rel_owned) = (src.to_path_buf(), rel.to_string());
        let errors = tx.clone();
        let writer = tokio::task::spawn_blocking(move || {
            if let Err(e) = tar_path(&src, &rel_owned, ChunkWriter(tx)) {
                let _ = errors
                    .blocking_send(Err(io::Error::other(format!("reading the snapshot: {e}"))));
            }
        });
        let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|chunk| (chunk.map(hyper::body::Frame::data), rx))
        });
        let body: LxdBody = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(chunks));
        let h = |k| self.daemon.file_header(k);
        let headers = [
            ("Content-Type", "application/octet-stream".to_string()),
            (h(FileHeader::Type), "file".to_string()),
            (h(FileHeader::Write), "overwrite".to_string()),
            (h(FileHeader::Mode), "0600".to_string()),
            (h(FileHeader::Uid), uid.to_string()),
            (h(FileHeader::Gid), gid.to_string()),
        ];
        let pushed = self
            .lxd
            .create_instance_file_stream(name, path, &headers, body, COPY_TIMEOUT)
            .await;
        let _ = writer.await;
        pushed.map_err(InstanceError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pools_that_keep_snapshots_as_files_restore_a_path() {
        for driver in ["dir", "btrfs"] {
            assert!(check_readable_snapshots(driver).is_ok(), "{driver}");
        }
        for driver in ["zfs", "lvm", "ceph", "cephfs", "powerflex", ""] {
            let refused = check_readable_snapshots(driver).unwrap_err();
            assert!(
                matches!(refused, InstanceError::Conflict(ref why)
                    if why.contains(&format!("the {driver} driver"))
                        && why.contains("restore the whole home")),
                "{driver}: {refused:?}"
            );
        }
    }

    #[test]
    fn a_path_through_a_link_is_refused_and_a_missing_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("notes")).unwrap();
        std::fs::write(root.join("notes/week3.md"), "w3").unwrap();
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        assert!(check_in_snapshot(root, "notes/week3.md").is_ok());
        // The link itself is copied as a link; through it is refused.
        assert!(check_in_snapshot(root, "out").is_ok());
        let through = check_in_snapshot(root, "out/passwd").unwrap_err();
        assert!(matches!(through, InstanceError::Invalid { ref field, .. } if field == "path"));
        let missing = check_in_snapshot(root, "notes/week4.md").unwrap_err();
        assert!(
            matches!(missing, InstanceError::NotFound { field: Some(ref f), .. } if f == "path")
        );
    }

    #[test]
    fn a_directory_goes_with_its_links_unfollowed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("project/src")).unwrap();
        std::fs::write(root.join("project/src/main.c"), "int main;").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("project/pw")).unwrap();
        let mut out = Vec::new();
        tar_path(&root.join("project"), "project", &mut out).unwrap();
        let mut archive = tar::Archive::new(&out[..]);
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            let kind = entry.header().entry_type();
            seen.push((entry.path().unwrap().display().to_string(), kind));
        }
        assert!(
            seen.contains(&("project/pw".into(), tar::EntryType::Symlink)),
            "{seen:?}"
        );
        assert!(
            seen.contains(&("project/src/main.c".into(), tar::EntryType::Regular)),
            "{seen:?}"
        );
    }
}
