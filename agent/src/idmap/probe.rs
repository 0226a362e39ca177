//! The first-start probe: whether this LXD remaps every file of a new isolated container on its
//! first start (no shiftfs, no idmapped mounts, or a release whose own test of them fails here),
//! which is what the agent's shift before the first start (`shift`) saves. `doctor` reports it.

use std::path::Path;

use crate::lxd::server::ServerEnvironment;
use crate::lxd::Daemon;

/// How LXD gives a new isolated container's files its id range on the first start.
#[derive(Debug)]
pub enum FirstStart {
    /// Mounted through shiftfs.
    Shiftfs,
    /// Mounted idmapped.
    Idmapped,
    /// Every file remapped: the kernel has no idmapped mounts.
    NoKernelSupport,
    /// Every file remapped: liblxc has no idmapped mounts.
    NoLxcSupport,
    /// Every file remapped: the release's test of idmapped mounts fails here
    /// ([`Daemon::probes_idmap_unmapped`]).
    TestRefused(std::io::Error),
}

impl FirstStart {
    /// Whether LXD chowns every file of the container on its first start.
    pub fn remaps(&self) -> bool {
        !matches!(self, FirstStart::Shiftfs | FirstStart::Idmapped)
    }
}

/// What this LXD does on a new container's first start, with the release's own test of the pool
/// (`pool_dir`) where the release needs it ([`unmapped_idmap_probe`]). Blocking.
pub fn first_start(daemon: &Daemon, env: &ServerEnvironment, pool_dir: &Path) -> FirstStart {
    if env.kernel_has("shiftfs") {
        return FirstStart::Shiftfs;
    }
    if !env.kernel_has("idmapped_mounts") {
        return FirstStart::NoKernelSupport;
    }
    if !env.lxc_has("idmapped_mounts_v2") {
        return FirstStart::NoLxcSupport;
    }
    if daemon.probes_idmap_unmapped() {
        if let Err(e) = unmapped_idmap_probe(pool_dir) {
            return FirstStart::TestRefused(e);
        }
    }
    FirstStart::Idmapped
}

/// LXD's own test, done the way the releases of [`Daemon::probes_idmap_unmapped`] do it: an idmapped
/// mount of `dir` (detached, never attached anywhere) for a fresh user namespace with no
/// mapping, made by `unshare --user`. Two raw syscalls: nix wraps neither `open_tree` nor
/// `mount_setattr`.
#[allow(unsafe_code)]
pub fn unmapped_idmap_probe(dir: &Path) -> std::io::Result<()> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    const OPEN_TREE_CLONE: libc::c_uint = 1;
    const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }

    let mut child = std::process::Command::new("unshare")
        .args(["--user", "--", "sleep", "10"])
        .stdin(std::process::Stdio::null())
        .spawn()?;
    let result = (|| {
        let own = std::fs::read_link("/proc/self/ns/user")?;
        let ns_path = format!("/proc/{}/ns/user", child.id());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::read_link(&ns_path)? == own {
            if std::time::Instant::now() > deadline {
                return Err(std::io::Error::other("unshare --user made no namespace"));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let ns = std::fs::File::open(&ns_path)?;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes())?;
        // SAFETY: plain syscalls on a NUL-terminated path and a live descriptor; the returned
        // descriptor is owned here and closed on drop, which drops the detached mount.
        let tree = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                path.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
            )
        };
        if tree < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `tree` is a descriptor the kernel just returned, owned by nothing else.
        let tree = unsafe { OwnedFd::from_raw_fd(tree as i32) };
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_IDMAP,
            attr_clr: 0,
            propagation: 0,
            userns_fd: ns.as_raw_fd() as u64,
        };
        // SAFETY: `attr` outlives the call and its size is passed with it.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lxd::server::ServerInfo;

    #[test]
    fn lxd_remaps_where_it_has_neither_idmapped_mounts_nor_shiftfs() {
        let env_of =
            |server: &str, version: &str, kernel: &[(&str, &str)], lxc: &[(&str, &str)]| {
                let map = |pairs: &[(&str, &str)]| {
                    pairs
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                };
                ServerEnvironment {
                    server: server.into(),
                    server_version: version.into(),
                    kernel_version: "6.18.0".into(),
                    firewall: "nftables".into(),
                    kernel_features: map(kernel),
                    lxc_features: map(lxc),
                }
            };
        let idmapped = [("idmapped_mounts", "true")];
        let v2 = [("idmapped_mounts_v2", "true")];
        // The test of an old release fails on a pool that is not there.
        let nowhere = Path::new("/nonexistent/pool");
        let env = |version: &str, kernel: &[(&str, &str)], lxc: &[(&str, &str)]| {
            env_of("lxd", version, kernel, lxc)
        };
        let how = |e: &ServerEnvironment| {
            let info = ServerInfo {
                api_extensions: vec![],
                environment: e.clone(),
            };
            first_start(&Daemon::from_info(&info, false), e, nowhere)
        };
        // Incus numbers its releases apart: its 5.0.2 never had LXD's test.
        assert!(matches!(
            how(&env_of("incus", "5.0.2", &idmapped, &v2)),
            FirstStart::Idmapped
        ));
        assert!(matches!(
            how(&env("6.1", &idmapped, &v2)),
            FirstStart::Idmapped
        ));
        assert!(matches!(
            how(&env("5.0.2", &idmapped, &v2)),
            FirstStart::TestRefused(_)
        ));
        assert!(matches!(
            how(&env("6.1", &[], &v2)),
            FirstStart::NoKernelSupport
        ));
        assert!(matches!(
            how(&env("6.1", &idmapped, &[("idmapped_mounts_v2", "false")])),
            FirstStart::NoLxcSupport
        ));
        let shiftfs = how(&env("5.0.2", &[("shiftfs", "true")], &[]));
        assert!(matches!(shiftfs, FirstStart::Shiftfs) && !shiftfs.remaps());
        assert!(how(&env("5.0.2", &idmapped, &v2)).remaps());
        assert!(!how(&env("6.1", &idmapped, &v2)).remaps());
    }
}
