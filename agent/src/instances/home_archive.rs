//! A home volume as a gzip tarball of its files (`POST /v1/volumes/{name}/archive`), which the
//! controller keeps in its archive store at a term's end for the student to download.
//!
//! The files are read through the daemon's volume backup, written volume-only (no snapshots):
//! LXD 5.0 and Incus 6.0 both make one through the same API for every storage driver, with the
//! files under `backup/volume/` (the moves use the same call). Reading the pool's directory
//! instead would depend on the driver (a btrfs subvolume, a zfs dataset or an LVM volume that
//! is mounted only while in use) and on each daemon's paths; the file API answers one file per
//! request. The backup's tarball is read as LXD streams it, its `backup/volume/` entries
//! re-rooted at the top (the daemon's `index.yaml` left out) and gzip-compressed on a blocking
//! thread into the answer, so the student gets their files, never a daemon's backup format,
//! and no part is held whole in memory. Owners are written as 0: the on-disk ids are the
//! container's shifted ones and mean nothing outside it. The backup goes once it has been read
//! (or the reading given up).

use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes};
use flate2::write::GzEncoder;
use futures_util::Stream;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::{InstanceError, Instances};

/// The backup an archive is read from (apart from a move's, so the two never meet).
const ARCHIVE_BACKUP: &str = "cohort-archive";
/// Where a custom volume's files sit in its backup tarball.
const VOLUME_ROOT: &str = "backup/volume";
/// Chunks in flight between LXD, the compressing thread and the controller.
const CHANNEL_CHUNKS: usize = 8;
/// Size of the chunks the compressed tarball is sent in.
const CHUNK_BYTES: usize = 256 * 1024;

/// The gzip tarball of a home's files, as it is made.
pub type ArchiveStream = std::pin::Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// Chunks from a channel read as one byte stream (on a blocking thread).
struct ChunkReader {
    chunks: mpsc::Receiver<io::Result<Bytes>>,
    chunk: Bytes,
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() {
            match self.chunks.blocking_recv() {
                Some(Ok(chunk)) => self.chunk = chunk,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        self.chunk.advance(n);
        Ok(n)
    }
}

/// Bytes written (on a blocking thread) sent on as chunks.
struct ChunkWriter(mpsc::Sender<io::Result<Bytes>>);

impl Write for ChunkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .blocking_send(Ok(Bytes::copy_from_slice(buf)))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the archive's reader left"))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `path` under the volume's root, re-rooted at the top; `None` for the root itself and for
/// what is not the volume's (the daemon's `index.yaml`).
fn in_volume(path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(VOLUME_ROOT).ok()?;
    (!rel.as_os_str().is_empty()).then(|| rel.to_path_buf())
}

/// Writes the files of a volume backup's tarball `backup` into `out` as a gzip tarball.
pub fn rewrite(backup: impl Read, out: impl Write) -> io::Result<()> {
    use tar::EntryType as E;
    let mut input = tar::Archive::new(backup);
    let gzip = GzEncoder::new(out, flate2::Compression::fast());
    let mut archive = tar::Builder::new(gzip);
    for entry in input.entries()? {
        let mut entry = entry?;
        let Some(path) = in_volume(&entry.path()?) else {
            continue;
        };
        let mut header = entry.header().clone();
        header.set_uid(0);
        header.set_gid(0);
        let kind = entry.header().entry_type();
        match kind {
            E::Regular | E::Continuous | E::GNUSparse => {
                header.set_entry_type(E::Regular);
                archive.append_data(&mut header, &path, &mut entry)?
            }
            E::Directory => archive.append_data(&mut header, &path, io::empty())?,
            E::Symlink | E::Link => {
                let target = entry
                    .link_name()?
                    .ok_or_else(|| io::Error::other(format!("{} has no target", path.display())))?
                    .into_owned();
                // A hard link names another entry of the tarball, re-rooted as it is.
                let target = match kind {
                    E::Link => in_volume(&target).unwrap_or(target),
                    _ => target,
                };
                archive.append_link(&mut header, &path, target)?
            }
            // Devices, fifos and sockets are not a student's work.
            _ => {}
        }
    }
    archive.into_inner()?.finish()?.flush()
}

impl Instances {
    /// `POST /v1/volumes/{name}/archive`: the home volume's files as a gzip tarball, streamed
    /// as it is made. The volume may be in use by a running container: the backup reads its
    /// files as they are at that moment.
    pub async fn archive_volume(&self, name: &str) -> Result<ArchiveStream, InstanceError> {
        super::transfer::home_name(name, "are archived")?;
        let (raw, cleanup) = self.volume_backup(name, ARCHIVE_BACKUP, true).await?;
        let (to_thread, from_lxd) = mpsc::channel(CHANNEL_CHUNKS);
        let (to_controller, out) = mpsc::channel(CHANNEL_CHUNKS);
        tokio::spawn(async move {
            let mut body = raw.body;
            while let Some(frame) = body.frame().await {
                let chunk = match frame {
                    Ok(frame) => match frame.into_data() {
                        Ok(data) => Ok(data),
                        Err(_) => continue,
                    },
                    Err(e) => Err(io::Error::other(format!("reading the backup: {e}"))),
                };
                let failed = chunk.is_err();
                if to_thread.send(chunk).await.is_err() || failed {
                    break;
                }
            }
        });
        let volume = name.to_string();
        tokio::task::spawn_blocking(move || {
            let _cleanup = cleanup;
            let reader = ChunkReader {
                chunks: from_lxd,
                chunk: Bytes::new(),
            };
            let writer = BufWriter::with_capacity(CHUNK_BYTES, ChunkWriter(to_controller.clone()));
            if let Err(e) = rewrite(reader, writer) {
                tracing::warn!(%volume, error = %e, "archiving a home failed");
                let _ = to_controller.blocking_send(Err(e));
            }
        });
        Ok(Box::pin(futures_util::stream::unfold(
            out,
            |mut out| async move { out.recv().await.map(|chunk| (chunk, out)) },
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backup() -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_uid(1_001_000);
            h.set_cksum();
            b.append_data(&mut h, path, data).unwrap();
        };
        add("backup/index.yaml", b"name: home-x\n");
        add("backup/volume/notes.txt", b"hello\n");
        add(
            &format!("backup/volume/deep/{}", "n".repeat(150)),
            b"long name",
        );
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "backup/volume/link", "notes.txt")
            .unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn only_the_volumes_files_come_out_rerooted_and_gzipped() {
        let mut out = Vec::new();
        rewrite(&backup()[..], &mut out).unwrap();
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(&out[..]));
        let mut seen = Vec::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().display().to_string();
            assert_eq!(entry.header().uid().unwrap(), 0, "{path}");
            let mut data = String::new();
            if entry.header().entry_type().is_file() {
                entry.read_to_string(&mut data).unwrap();
            }
            seen.push((path, data));
        }
        let long = format!("deep/{}", "n".repeat(150));
        assert_eq!(
            seen,
            [
                ("notes.txt".to_string(), "hello\n".to_string()),
                (long, "long name".to_string()),
                ("link".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn a_damaged_backup_is_an_error() {
        let mut damaged = backup();
        damaged.truncate(700);
        assert!(rewrite(&damaged[..], io::sink()).is_err());
    }
}
