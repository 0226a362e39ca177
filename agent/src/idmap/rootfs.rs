//! Reading and writing a few small files in a stopped container's root filesystem from the
//! host, where the storage driver keeps it mounted while stopped (btrfs, dir): what the agent
//! puts into a new container before its first boot, without LXD's file API. That API serves a
//! stopped container through a helper process it starts for the instance, and LXD 5.0.2 loses
//! the helper's socket when calls to fresh containers come close together (see `instances::files`); a class
//! being created is exactly that.
//!
//! Nothing in the tree is trusted: it is an image's or a template's. Each path is opened one
//! component at a time relative to its parent, never following a link, so a symlink or anything
//! but a directory on the way is an error (the caller then goes through LXD, which resolves the
//! path inside the container). A file is written under a temporary name and renamed over the old
//! one, so a link in its place is replaced, never written through. What is made takes the owner
//! of the root directory: the container's root as the files are mapped now (the image's 0, or a
//! template's range), which the first start's shift then moves along with every other file.

use std::ffi::{CString, OsStr};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::unistd::{Gid, Uid, UnlinkatFlags};

/// A file to write: its absolute path inside the container, its content and mode.
#[derive(Debug, Clone)]
pub struct RootFile<'a> {
    pub path: &'a str,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// Why a file could not be read or written from the host.
#[derive(Debug, thiserror::Error)]
#[error("{path} in {rootfs}: {source}")]
pub struct RootfsError {
    rootfs: String,
    path: String,
    source: io::Error,
}

/// Writes every file, making missing parent directories (mode 0755). Blocking.
pub fn write_files(rootfs: &Path, files: &[RootFile<'_>]) -> Result<(), RootfsError> {
    let fail = |path: &str| {
        let (rootfs, path) = (rootfs.display().to_string(), path.to_string());
        move |source: io::Error| RootfsError {
            rootfs,
            path,
            source,
        }
    };
    let root = open_dir(None, rootfs.as_os_str()).map_err(fail("/"))?;
    let st = nix::sys::stat::fstat(root.as_raw_fd()).map_err(|e| fail("/")(e.into()))?;
    let owner = (Uid::from_raw(st.st_uid), Gid::from_raw(st.st_gid));
    for file in files {
        write_one(&root, file, owner).map_err(fail(file.path))?;
    }
    Ok(())
}

/// The file's content, `None` when it (or a directory on its way) does not exist. Blocking.
pub fn read_file(rootfs: &Path, path: &str) -> Result<Option<Vec<u8>>, RootfsError> {
    let fail = |source: io::Error| RootfsError {
        rootfs: rootfs.display().to_string(),
        path: path.to_string(),
        source,
    };
    let root = open_dir(None, rootfs.as_os_str()).map_err(fail)?;
    let (dirs, name) = split(path).map_err(fail)?;
    let mut dir = root;
    for component in dirs {
        dir = match open_dir(Some(dir.as_raw_fd()), component) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(fail(e)),
        };
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = match open_at(Some(dir.as_raw_fd()), name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(fail(e)),
    };
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| fail(e.into()))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(fail(io::Error::other("not a regular file")));
    }
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut std::fs::File::from(fd), &mut bytes).map_err(fail)?;
    Ok(Some(bytes))
}

/// The directories of an absolute path and its last component; `.`, `..` and empty components
/// are refused.
fn split(path: &str) -> io::Result<(Vec<&OsStr>, &OsStr)> {
    let invalid = || io::Error::new(io::ErrorKind::InvalidInput, "not a plain absolute path");
    let rest = path.strip_prefix('/').ok_or_else(invalid)?;
    let mut parts: Vec<&OsStr> = Vec::new();
    for part in rest.split('/') {
        if part.is_empty() || part == "." || part == ".." || part.contains('\0') {
            return Err(invalid());
        }
        parts.push(OsStr::new(part));
    }
    let name = parts.pop().ok_or_else(invalid)?;
    Ok((parts, name))
}

fn write_one(root: &OwnedFd, file: &RootFile<'_>, owner: (Uid, Gid)) -> io::Result<()> {
    let (dirs, name) = split(file.path)?;
    let mut dir = root.try_clone()?;
    for component in dirs {
        dir = match open_dir(Some(dir.as_raw_fd()), component) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                make_dir(dir.as_raw_fd(), component, owner)?
            }
            other => other?,
        };
    }
    let dir = dir.as_raw_fd();
    let mut temporary = OsStr::new(".").to_os_string();
    temporary.push(name);
    temporary.push(".cohort-new");
    let temporary = temporary.as_os_str();
    match nix::unistd::unlinkat(Some(dir), temporary, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(nix::Error::ENOENT) => {}
        Err(e) => return Err(e.into()),
    }
    let written = (|| {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = open_at(Some(dir), temporary, flags, Mode::from_bits_truncate(0o600))?;
        nix::unistd::fchown(fd.as_raw_fd(), Some(owner.0), Some(owner.1))?;
        nix::sys::stat::fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(file.mode & 0o7777))?;
        std::fs::File::from(fd).write_all(&file.content)?;
        nix::fcntl::renameat(Some(dir), temporary, Some(dir), name)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = nix::unistd::unlinkat(Some(dir), temporary, UnlinkatFlags::NoRemoveDir);
    }
    written
}

/// Makes the directory `name` in `parent` (0755, owned by `owner`) and opens it.
fn make_dir(parent: RawFd, name: &OsStr, owner: (Uid, Gid)) -> io::Result<OwnedFd> {
    match nix::sys::stat::mkdirat(Some(parent), name, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(nix::Error::EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    let dir = open_dir(Some(parent), name)?;
    nix::unistd::fchown(dir.as_raw_fd(), Some(owner.0), Some(owner.1))?;
    nix::sys::stat::fchmod(dir.as_raw_fd(), Mode::from_bits_truncate(0o755))?;
    Ok(dir)
}

/// Opens a directory without following a link (`ELOOP` or `ENOTDIR` otherwise).
fn open_dir(parent: Option<RawFd>, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    open_at(parent, name, flags, Mode::empty())
}

#[allow(unsafe_code)]
fn open_at(parent: Option<RawFd>, name: &OsStr, flags: OFlag, mode: Mode) -> io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a path"))?;
    let fd = nix::fcntl::openat(parent, name.as_c_str(), flags, mode)?;
    // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn key_files() -> Vec<RootFile<'static>> {
        vec![
            RootFile {
                path: "/etc/ssh/ssh_host_ed25519_key",
                content: b"private\n".to_vec(),
                mode: 0o600,
            },
            RootFile {
                path: "/etc/ssh/sshd_config.d/cohort.conf",
                content: b"HostKey /etc/ssh/ssh_host_ed25519_key\n".to_vec(),
                mode: 0o644,
            },
        ]
    }

    /// A root filesystem as a template's would be, its files owned by `(uid, gid)`.
    fn tree(uid: u32, gid: u32) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        std::fs::create_dir_all(root.join("etc/ssh")).unwrap();
        for d in ["", "etc", "etc/ssh"] {
            std::os::unix::fs::chown(root.join(d), Some(uid), Some(gid)).unwrap();
        }
        dir
    }

    fn stat(path: &Path) -> (u32, u32, u32) {
        let m = std::fs::symlink_metadata(path).unwrap();
        (m.uid(), m.gid(), m.mode() & 0o7777)
    }

    #[test]
    fn files_and_missing_directories_are_made_as_the_containers_root_with_their_modes() {
        let dir = tree(1_065_536, 1_065_536);
        let root = dir.path().join("rootfs");
        let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o077));
        let written = write_files(&root, &key_files());
        nix::sys::stat::umask(old);
        written.unwrap();

        let key = root.join("etc/ssh/ssh_host_ed25519_key");
        assert_eq!(std::fs::read(&key).unwrap(), b"private\n");
        assert_eq!(stat(&key), (1_065_536, 1_065_536, 0o600));
        let conf = root.join("etc/ssh/sshd_config.d/cohort.conf");
        assert_eq!(stat(&conf), (1_065_536, 1_065_536, 0o644), "umask ignored");
        assert_eq!(
            stat(&root.join("etc/ssh/sshd_config.d")),
            (1_065_536, 1_065_536, 0o755)
        );
        assert_eq!(
            read_file(&root, "/etc/ssh/ssh_host_ed25519_key").unwrap(),
            Some(b"private\n".to_vec())
        );
        assert_eq!(read_file(&root, "/etc/ssh/missing").unwrap(), None);
        assert_eq!(read_file(&root, "/nowhere/at/all").unwrap(), None);

        // Written again: replaced, nothing temporary left behind.
        let mut again = key_files();
        again[0].content = b"second\n".to_vec();
        write_files(&root, &again).unwrap();
        assert_eq!(std::fs::read(&key).unwrap(), b"second\n");
        let mut names: Vec<_> = std::fs::read_dir(root.join("etc/ssh"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["ssh_host_ed25519_key", "sshd_config.d"]);
    }

    #[test]
    fn links_in_the_tree_are_never_followed_out_of_it() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("ssh_host_ed25519_key"), "host's own\n").unwrap();

        // A directory on the way that is a link to the host's: refused, nothing written there.
        let dir = tree(0, 0);
        let root = dir.path().join("rootfs");
        std::fs::remove_dir(root.join("etc/ssh")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("etc/ssh")).unwrap();
        let err = write_files(&root, &key_files()).unwrap_err();
        assert!(
            err.to_string().contains("/etc/ssh/ssh_host_ed25519_key"),
            "{err}"
        );
        assert!(read_file(&root, "/etc/ssh/ssh_host_ed25519_key").is_err());
        assert_eq!(
            std::fs::read_to_string(outside.path().join("ssh_host_ed25519_key")).unwrap(),
            "host's own\n"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);

        // The file itself a link to the host's: the link is replaced, its target untouched;
        // reading through one is refused.
        let dir = tree(0, 0);
        let root = dir.path().join("rootfs");
        let target = outside.path().join("ssh_host_ed25519_key");
        std::os::unix::fs::symlink(&target, root.join("etc/ssh/ssh_host_ed25519_key")).unwrap();
        assert!(read_file(&root, "/etc/ssh/ssh_host_ed25519_key").is_err());
        write_files(&root, &key_files()).unwrap();
        let key = root.join("etc/ssh/ssh_host_ed25519_key");
        assert!(std::fs::symlink_metadata(&key).unwrap().is_file());
        assert_eq!(std::fs::read(&key).unwrap(), b"private\n");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "host's own\n");
    }

    #[test]
    fn paths_that_are_not_plain_and_absolute_are_refused() {
        let dir = tree(0, 0);
        let root = dir.path().join("rootfs");
        for path in [
            "etc/ssh/x",
            "/etc/../x",
            "/etc//x",
            "/etc/./x",
            "/",
            "/etc/ssh/",
        ] {
            let file = RootFile {
                path,
                content: Vec::new(),
                mode: 0o644,
            };
            let err = write_files(&root, &[file]).unwrap_err();
            assert_eq!(err.source.kind(), io::ErrorKind::InvalidInput, "{path}");
        }
        assert!(write_files(&dir.path().join("missing"), &key_files()).is_err());
    }
}
