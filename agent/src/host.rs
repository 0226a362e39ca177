//! Host facts with nix: cores, memory, hostname, kernel, and the free/total space of the storage
//! pool's filesystem (statvfs).

use std::path::Path;

use cohort_proto::agent::HostFacts;
use nix::sys::statvfs::statvfs;
use nix::unistd::{sysconf, SysconfVar};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// a host fact could not be read
    #[error("cannot read {what}: {source}")]
    Read {
        what: &'static str,
        source: nix::Error,
    },
}

/// Online CPU cores (at least 1).
pub fn cores() -> u32 {
    sysconf(SysconfVar::_NPROCESSORS_ONLN)
        .ok()
        .flatten()
        .map_or(1, |n| n.max(1) as u32)
}

/// Free and total bytes of the filesystem holding `path`.
pub fn disk_space(path: &Path) -> Result<(u64, u64), HostError> {
    let st = statvfs(path).map_err(|source| HostError::Read {
        what: "storage pool filesystem (statvfs)",
        source,
    })?;
    let frag = st.fragment_size() as u64;
    Ok((
        st.blocks_available() as u64 * frag,
        st.blocks() as u64 * frag,
    ))
}

/// The facts the inventory reports; `pool_path` is where the storage pool is mounted.
pub fn facts(pool_path: &Path) -> Result<HostFacts, HostError> {
    let uts = nix::sys::utsname::uname().map_err(|source| HostError::Read {
        what: "kernel (uname)",
        source,
    })?;
    let info = nix::sys::sysinfo::sysinfo().map_err(|source| HostError::Read {
        what: "memory (sysinfo)",
        source,
    })?;
    let hostname = nix::unistd::gethostname().map_err(|source| HostError::Read {
        what: "hostname",
        source,
    })?;
    let (disk_free_bytes, disk_total_bytes) = disk_space(pool_path)?;
    Ok(HostFacts {
        hostname: hostname.to_string_lossy().into_owned(),
        kernel: uts.release().to_string_lossy().into_owned(),
        cores: cores(),
        memory_bytes: info.ram_total(),
        disk_free_bytes,
        disk_total_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_of_this_machine_are_plausible() {
        let f = facts(Path::new("/")).unwrap();
        assert!(f.cores >= 1);
        assert!(f.memory_bytes > 64 * 1024 * 1024);
        assert!(f.disk_total_bytes >= f.disk_free_bytes && f.disk_total_bytes > 0);
        assert!(!f.kernel.is_empty() && !f.hostname.is_empty());
    }
}
