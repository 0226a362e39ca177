//! The GPU memory cap of a container that shares its GPU: the interposer from `native/cuda-cap`
//! (built by `build.rs`, embedded here) installed into the container with the cap in a file
//! beside it, and preloaded into every process through `/etc/ld.so.preload`. All three are
//! written owned by the container's root and not writable by anyone else, so a student (without
//! sudo) can neither raise the cap nor take the preload out; the library itself refuses every
//! allocation when its file is not as written here (see the C source's header). Beside them the
//! ledger: an empty root-owned file every process may open for writing, on which the library's
//! processes hold file locks that add up to the container's use of the cap, so the cap is the
//! container's and not each process's (what a student can do with it: only deny themselves).

use bytes::Bytes;
use cohort_proto::agent::GpuAttachment;

use crate::idmap::rootfs::{self, RootFile};
use crate::instances::{InstanceError, Instances};

/// The library, as built with this agent.
pub const LIBRARY: &[u8] = include_bytes!(env!("CUDA_CAP_LIBRARY_BUILT"));
/// Where it goes inside the container.
pub const LIBRARY_PATH: &str = "/usr/lib/cohort/libcohort_cuda_cap.so";
/// The cap, read by the library (its path is compiled into it).
pub const CONFIG_PATH: &str = "/etc/cohort/cuda-cap.conf";
/// The ledger the container's processes lock their share of the cap on (its path is compiled
/// into the library). Written once and never replaced: the locks of running processes are on
/// the file they opened, and a new file would forget them.
pub const LEDGER_PATH: &str = "/etc/cohort/cuda-cap.ledger";
const PRELOAD_PATH: &str = "/etc/ld.so.preload";
/// Below this a CUDA context cannot do anything useful; a smaller cap is a mistake.
pub const MIN_CAP_BYTES: u64 = 64 << 20;

/// The cap of a container holding `gpus`: the smallest any of them carries (the library counts
/// each device against one number). None when none is capped.
pub fn cap_of(gpus: &[GpuAttachment]) -> Option<u64> {
    gpus.iter().filter_map(|g| g.memory_cap_bytes).min()
}

/// The cap file's content.
pub fn config_file(cap_bytes: u64) -> String {
    format!("# Written by Cohort's agent: the GPU memory cap of this container (docs/gpus.md).\nlimit_bytes={cap_bytes}\n")
}

/// `/etc/ld.so.preload` with the library in it, keeping whatever the image preloads already.
pub fn preload_with(existing: &str) -> String {
    if existing.lines().any(|l| l.trim() == LIBRARY_PATH) {
        return existing.to_string();
    }
    let mut out = existing.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(LIBRARY_PATH);
    out.push('\n');
    out
}

impl Instances {
    /// Installs the cap into the (stopped) container `name`: straight into its root filesystem
    /// where that is on this host, otherwise through LXD's file API.
    pub(crate) async fn install_cuda_cap(
        &self,
        name: &str,
        cap_bytes: u64,
    ) -> Result<(), InstanceError> {
        let existing = match self
            .on_host(name, "reading ld.so.preload", |rootfs| {
                rootfs::read_file(rootfs, PRELOAD_PATH)
            })
            .await
        {
            Some(bytes) => bytes,
            None => match self.pull_file(name, PRELOAD_PATH).await {
                Ok(file) => Some(file.bytes.to_vec()),
                Err(InstanceError::NotFound { .. }) => None,
                Err(e) => return Err(e),
            },
        };
        let preload = preload_with(&String::from_utf8_lossy(&existing.unwrap_or_default()));
        let mut files = vec![
            RootFile {
                path: LIBRARY_PATH,
                content: LIBRARY.to_vec(),
                mode: 0o644,
            },
            RootFile {
                path: CONFIG_PATH,
                content: config_file(cap_bytes).into_bytes(),
                mode: 0o644,
            },
        ];
        if !self.has_ledger(name).await? {
            // Writable by all: a write lock needs a descriptor open for writing; the content is
            // never read, so writing it changes nothing.
            files.push(RootFile {
                path: LEDGER_PATH,
                content: Vec::new(),
                mode: 0o666,
            });
        }
        // Last: a preload naming a library not there yet would warn in every process.
        files.push(RootFile {
            path: PRELOAD_PATH,
            content: preload.into_bytes(),
            mode: 0o644,
        });
        let to_write = files.clone();
        let written = self
            .on_host(name, "writing the GPU memory cap", move |rootfs| {
                rootfs::write_files(rootfs, &to_write)
            })
            .await;
        if written.is_none() {
            for file in files {
                self.push_file(name, file.path, Bytes::from(file.content), file.mode, 0, 0)
                    .await?;
            }
        }
        tracing::info!(instance = name, cap_bytes, "GPU memory cap installed");
        Ok(())
    }

    /// Whether the container has its ledger already (a GPU attached again, a cap changed).
    async fn has_ledger(&self, name: &str) -> Result<bool, InstanceError> {
        if let Some(found) = self
            .on_host(name, "looking for the GPU cap's ledger", |rootfs| {
                rootfs::read_file(rootfs, LEDGER_PATH)
            })
            .await
        {
            return Ok(found.is_some());
        }
        match self.pull_file(name, LEDGER_PATH).await {
            Ok(_) => Ok(true),
            Err(InstanceError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_keeps_what_the_image_has_and_adds_the_cap_once() {
        assert_eq!(preload_with(""), format!("{LIBRARY_PATH}\n"));
        let theirs = preload_with("/usr/lib/libfoo.so");
        assert_eq!(theirs, format!("/usr/lib/libfoo.so\n{LIBRARY_PATH}\n"));
        assert_eq!(preload_with(&theirs), theirs);
    }

    #[test]
    fn the_library_is_embedded_and_the_file_parses_as_the_library_reads_it() {
        assert!(LIBRARY.starts_with(b"\x7fELF"));
        assert!(config_file(1 << 30)
            .lines()
            .any(|l| l == "limit_bytes=1073741824"));
    }
}
