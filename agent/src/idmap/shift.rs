//! Moving a new container's files into its id range before its first start, where LXD would
//! otherwise do it on the start, slowly.
//!
//! The files of an isolated container must be owned by ids of its own range. LXD mounts the
//! root idmapped where it can. Where it cannot (a kernel without idmapped mounts, or LXD before
//! 5.0.4 on a kernel that refuses its test of them: see `probe`), the first start chowns every
//! file, walking the tree by full path: several path walks per file, most of the CPU a class's
//! bring-up spends. The agent does the same work on the stopped container, one directory
//! descriptor at a time, then records it in `volatile.last_state.idmap`; LXD finds the files
//! already in the range it would have moved them to and starts the container as it is.
//!
//! Each file gets what LXD gives it: an id inside the map moves, one outside stays; the set-id
//! bits the chown clears are put back; POSIX ACL entries move; file capabilities, which the
//! kernel drops on a chown, are written back namespaced (v3) to the container's root. A file
//! with several links moves once. A map whose host ids lie outside its container ids never
//! moves an id twice, so a walk cut short is finished by LXD's own remap at the start.

use std::collections::HashSet;
use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use nix::dir::{Dir, Type};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::{Gid, Uid};
use serde::Deserialize;

/// One line of an LXD id map (`volatile.idmap.next`): `Maprange` ids from `Nsid` in the
/// container are `Hostid`.. on the host, for users, groups or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct MapEntry {
    #[serde(rename = "Isuid")]
    pub is_uid: bool,
    #[serde(rename = "Isgid")]
    pub is_gid: bool,
    #[serde(rename = "Hostid")]
    pub host: u64,
    #[serde(rename = "Nsid")]
    pub ns: u64,
    #[serde(rename = "Maprange")]
    pub range: u64,
}

/// What a walk does to ids: a file owned by a host id of `from` (the map its files are in now)
/// moves to the host id `to` gives the same container id; any other id stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap {
    from: Vec<MapEntry>,
    to: Vec<MapEntry>,
}

impl Remap {
    /// From the files' map (`volatile.last_state.idmap`: `[]` for files as the image has them,
    /// a template's map for a copy of a template that was started) to the container's next
    /// map, both as LXD records them. Refuses an empty `to` (nothing to shift: a privileged
    /// container) and maps whose host ranges meet, where a moved id could not be told from one
    /// still to move (only a complete, uninterrupted walk could apply those).
    pub fn new(from: &str, to: &str) -> Result<Self, String> {
        let parse = |json: &str| {
            serde_json::from_str::<Vec<MapEntry>>(json)
                .map_err(|e| format!("unreadable id map: {e}"))
        };
        let to = parse(to)?;
        if to.is_empty() {
            return Err("the container's id map is empty".into());
        }
        let mut from = parse(from)?;
        if from.is_empty() {
            // Unshifted: each container id is its own host id.
            from = to.iter().map(|e| MapEntry { host: e.ns, ..*e }).collect();
        }
        for a in &from {
            for b in &to {
                let same_kind = (a.is_uid && b.is_uid) || (a.is_gid && b.is_gid);
                let overlap = a.host < b.host + b.range && b.host < a.host + a.range;
                if same_kind && overlap {
                    return Err(format!(
                        "host ids {}.. of the files' map meet {}.. of the container's",
                        a.host, b.host
                    ));
                }
            }
        }
        Ok(Remap { from, to })
    }

    fn shift(&self, id: u32, uid: bool) -> Option<u32> {
        let kind = |e: &&MapEntry| if uid { e.is_uid } else { e.is_gid };
        let id = u64::from(id);
        let ns = self
            .from
            .iter()
            .filter(kind)
            .find(|e| id >= e.host && id < e.host + e.range)
            .map(|e| id - e.host + e.ns)?;
        self.to
            .iter()
            .filter(kind)
            .find(|e| ns >= e.ns && ns < e.ns + e.range)
            .and_then(|e| u32::try_from(ns - e.ns + e.host).ok())
    }

    /// Where a file owned by uid `id` goes, `None` when it stays.
    pub fn uid(&self, id: u32) -> Option<u32> {
        self.shift(id, true)
    }

    /// Where a file of gid `id` goes.
    pub fn gid(&self, id: u32) -> Option<u32> {
        self.shift(id, false)
    }

    /// The container's root on the host, once moved: the owner of namespaced capabilities.
    fn root(&self) -> Option<u32> {
        self.to
            .iter()
            .find(|e| e.is_uid && e.ns == 0)
            .and_then(|e| u32::try_from(e.host).ok())
    }
}

/// Why a tree was not (entirely) shifted.
#[derive(Debug, thiserror::Error)]
pub enum ShiftError {
    /// a file could not be read or changed
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    /// another filesystem (a mount or a nested btrfs subvolume) inside the tree, which LXD
    /// handles itself
    #[error("{0}: another filesystem inside the root; left to LXD")]
    Nested(PathBuf),
}

/// What a walk did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shifted {
    /// Files, directories and links whose owner or group moved.
    pub files: u64,
    /// Of those, files whose capabilities were written back.
    pub caps: u64,
    /// Files and directories whose ACL entries moved.
    pub acls: u64,
}

const XATTR_CAPS: &CStr = c"security.capability";
const XATTR_ACL_ACCESS: &CStr = c"system.posix_acl_access";
const XATTR_ACL_DEFAULT: &CStr = c"system.posix_acl_default";

/// Shifts every file under `root` (`root` included) by `map`. Blocking: run it off the async
/// runtime.
pub fn shift_tree(root: &Path, map: &Remap) -> Result<Shifted, ShiftError> {
    let io_at = |path: &Path| {
        let path = path.to_path_buf();
        move |e: nix::Error| ShiftError::Io {
            path: path.clone(),
            source: e.into(),
        }
    };
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let dir = Dir::open(root, flags, Mode::empty()).map_err(io_at(root))?;
    let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(io_at(root))?;
    let mut walk = Walk {
        map,
        root_dev: st.st_dev,
        root_uid: map.root(),
        linked: HashSet::new(),
        done: Shifted::default(),
    };
    walk.directory(dir, &st, root)?;
    Ok(walk.done)
}

struct Walk<'a> {
    map: &'a Remap,
    root_dev: u64,
    /// The container's root on the host: the owner of namespaced capabilities.
    root_uid: Option<u32>,
    /// (device, inode) of files with several links already shifted.
    linked: HashSet<(u64, u64)>,
    done: Shifted,
}

impl Walk<'_> {
    fn ids(&self, st: &FileStat) -> (Option<Uid>, Option<Gid>) {
        (
            self.map.uid(st.st_uid).map(Uid::from_raw),
            self.map.gid(st.st_gid).map(Gid::from_raw),
        )
    }

    /// Whether this is a further link to a file already shifted.
    fn seen(&mut self, st: &FileStat) -> bool {
        st.st_nlink > 1 && !self.linked.insert((st.st_dev, st.st_ino))
    }

    /// Shifts the directory (open as `dir`) and everything in it.
    fn directory(&mut self, mut dir: Dir, st: &FileStat, path: &Path) -> Result<(), ShiftError> {
        let fd = dir.as_raw_fd();
        let io = |e: io::Error| ShiftError::Io {
            path: path.to_path_buf(),
            source: e,
        };
        let access = sys::get_xattr(fd, XATTR_ACL_ACCESS).map_err(io)?;
        let default = sys::get_xattr(fd, XATTR_ACL_DEFAULT).map_err(io)?;
        let (uid, gid) = self.ids(st);
        if uid.is_some() || gid.is_some() {
            nix::unistd::fchown(fd, uid, gid).map_err(|e| io(e.into()))?;
            self.done.files += 1;
        }
        let moved_access = self.put_acl(fd, XATTR_ACL_ACCESS, access).map_err(io)?;
        let moved_default = self.put_acl(fd, XATTR_ACL_DEFAULT, default).map_err(io)?;
        if moved_access || moved_default {
            self.done.acls += 1;
        }
        // Names first: the directory's stream stays open while the walk descends.
        let mut entries = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(|e| io(e.into()))?;
            let name = entry.file_name();
            if name != c"." && name != c".." {
                entries.push((name.to_owned(), entry.file_type()));
            }
        }
        for (name, kind) in entries {
            self.entry(fd, &name, kind, path)?;
        }
        Ok(())
    }

    /// `name` in the directory `parent` (open as `parent_fd`).
    fn entry(
        &mut self,
        parent_fd: RawFd,
        name: &CStr,
        kind: Option<Type>,
        parent: &Path,
    ) -> Result<(), ShiftError> {
        use std::os::unix::ffi::OsStrExt;
        let path = || parent.join(std::ffi::OsStr::from_bytes(name.to_bytes()));
        let io = |e: io::Error| ShiftError::Io {
            path: path(),
            source: e,
        };
        let nix_io = |e: nix::Error| io(e.into());
        match kind {
            Some(Type::Directory) => {
                let flags =
                    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
                let dir =
                    Dir::openat(Some(parent_fd), name, flags, Mode::empty()).map_err(nix_io)?;
                let st = nix::sys::stat::fstat(dir.as_raw_fd()).map_err(nix_io)?;
                if st.st_dev != self.root_dev {
                    return Err(ShiftError::Nested(path()));
                }
                self.directory(dir, &st, &path())
            }
            Some(Type::File) => {
                let flags = OFlag::O_RDONLY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_NONBLOCK
                    | OFlag::O_NOCTTY
                    | OFlag::O_NOATIME
                    | OFlag::O_CLOEXEC;
                let fd = sys::open_at(parent_fd, name, flags).map_err(io)?;
                let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(nix_io)?;
                self.file(&fd, &st).map_err(io)
            }
            None => {
                // The filesystem gave no type: ask, then treat it as what it is.
                let st =
                    nix::sys::stat::fstatat(Some(parent_fd), name, AtFlags::AT_SYMLINK_NOFOLLOW)
                        .map_err(nix_io)?;
                let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
                    SFlag::S_IFDIR => Type::Directory,
                    SFlag::S_IFREG => Type::File,
                    _ => Type::Symlink,
                };
                self.entry(parent_fd, name, Some(kind), parent)
            }
            // Links, devices, pipes and sockets: only their owner.
            Some(_) => {
                let st =
                    nix::sys::stat::fstatat(Some(parent_fd), name, AtFlags::AT_SYMLINK_NOFOLLOW)
                        .map_err(nix_io)?;
                if self.seen(&st) {
                    return Ok(());
                }
                let (uid, gid) = self.ids(&st);
                if uid.is_some() || gid.is_some() {
                    nix::unistd::fchownat(
                        Some(parent_fd),
                        name,
                        uid,
                        gid,
                        AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .map_err(nix_io)?;
                    self.done.files += 1;
                }
                Ok(())
            }
        }
    }

    /// A regular file, open as `fd`.
    fn file(&mut self, fd: &OwnedFd, st: &FileStat) -> io::Result<()> {
        if self.seen(st) {
            return Ok(());
        }
        let fd = fd.as_raw_fd();
        let acl = sys::get_xattr(fd, XATTR_ACL_ACCESS)?;
        let (uid, gid) = self.ids(st);
        if uid.is_some() || gid.is_some() {
            // The chown drops set-id bits and capabilities: read them first, put them back.
            let caps = sys::get_xattr(fd, XATTR_CAPS)?;
            nix::unistd::fchown(fd, uid, gid)?;
            self.done.files += 1;
            if st.st_mode & (libc::S_ISUID | libc::S_ISGID) != 0 {
                nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(st.st_mode & 0o7777))?;
            }
            if let (Some(caps), Some(root)) = (caps, self.root_uid) {
                sys::set_xattr(fd, XATTR_CAPS, &namespaced_caps(&caps, root))?;
                self.done.caps += 1;
            }
        }
        if self.put_acl(fd, XATTR_ACL_ACCESS, acl)? {
            self.done.acls += 1;
        }
        Ok(())
    }

    /// Writes back `acl` (as read before the chown) with its user and group entries moved;
    /// whether anything moved.
    fn put_acl(&self, fd: RawFd, name: &CStr, acl: Option<Vec<u8>>) -> io::Result<bool> {
        let Some(acl) = acl else { return Ok(false) };
        match shift_acl(&acl, self.map) {
            Some(moved) => sys::set_xattr(fd, name, &moved).map(|()| true),
            None => Ok(false),
        }
    }
}

/// The ACL in the kernel's xattr form (a 4-byte version, then 8-byte entries of tag, permissions
/// and id) with its named user and group entries moved; `None` when none moved.
pub fn shift_acl(acl: &[u8], map: &Remap) -> Option<Vec<u8>> {
    const ACL_USER: u16 = 0x02;
    const ACL_GROUP: u16 = 0x08;
    if acl.len() < 4 || !(acl.len() - 4).is_multiple_of(8) {
        return None;
    }
    let mut out = acl.to_vec();
    let mut moved = false;
    for entry in out[4..].chunks_exact_mut(8) {
        let tag = u16::from_le_bytes([entry[0], entry[1]]);
        let id = u32::from_le_bytes([entry[4], entry[5], entry[6], entry[7]]);
        let new = match tag {
            ACL_USER => map.uid(id),
            ACL_GROUP => map.gid(id),
            _ => None,
        };
        if let Some(new) = new {
            entry[4..8].copy_from_slice(&new.to_le_bytes());
            moved = true;
        }
    }
    moved.then_some(out)
}

/// File capabilities (`security.capability`, any revision) rewritten as revision 3, owned by
/// the host id of the container's root, as LXD writes them.
pub fn namespaced_caps(caps: &[u8], root: u32) -> Vec<u8> {
    const REVISION_MASK: u32 = 0xFF00_0000;
    const REVISION_3: u32 = 0x0300_0000;
    let mut out = vec![0u8; 24];
    let n = caps.len().min(20);
    out[..n].copy_from_slice(&caps[..n]);
    let magic = u32::from_le_bytes([out[0], out[1], out[2], out[3]]);
    out[..4].copy_from_slice(&((magic & !REVISION_MASK) | REVISION_3).to_le_bytes());
    out[20..].copy_from_slice(&root.to_le_bytes());
    out
}

/// The descriptor-relative calls nix 0.29 leaves raw: a file opened relative to a directory
/// (nix returns a bare descriptor) and extended attributes by descriptor (nix has none).
#[allow(unsafe_code)]
mod sys {
    use std::ffi::CStr;
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd, RawFd};

    use nix::fcntl::OFlag;
    use nix::sys::stat::Mode;

    pub fn open_at(dir: RawFd, name: &CStr, flags: OFlag) -> io::Result<OwnedFd> {
        let fd = nix::fcntl::openat(Some(dir), name, flags, Mode::empty())?;
        // SAFETY: `fd` was just returned by the kernel and is owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The attribute's value, `None` when the file has none.
    pub fn get_xattr(fd: RawFd, name: &CStr) -> io::Result<Option<Vec<u8>>> {
        let mut buf = vec![0u8; 256];
        loop {
            // SAFETY: `name` is NUL-terminated and `buf` is writable for the length given.
            let n =
                unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                buf.truncate(n as usize);
                return Ok(Some(buf));
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENODATA) | Some(libc::EOPNOTSUPP) => return Ok(None),
                Some(libc::ERANGE) if buf.len() < 1 << 16 => buf.resize(buf.len() * 4, 0),
                _ => return Err(err),
            }
        }
    }

    pub fn set_xattr(fd: RawFd, name: &CStr, value: &[u8]) -> io::Result<()> {
        // SAFETY: `name` is NUL-terminated and `value` is readable for the length given.
        let rc =
            unsafe { libc::fsetxattr(fd, name.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEXT: &str = r#"[{"Isuid":true,"Isgid":false,"Hostid":1065536,"Nsid":0,"Maprange":65536},
        {"Isuid":false,"Isgid":true,"Hostid":2065536,"Nsid":0,"Maprange":65536}]"#;

    /// Unshifted files into `NEXT`.
    fn map() -> Remap {
        Remap::new("[]", NEXT).unwrap()
    }

    fn owner(path: &Path) -> (u32, u32, u32) {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).unwrap();
        (m.uid(), m.gid(), m.mode() & 0o7777)
    }

    fn xattr(path: &Path, name: &CStr) -> Option<Vec<u8>> {
        let f = std::fs::File::open(path).unwrap();
        sys::get_xattr(f.as_raw_fd(), name).unwrap()
    }

    fn set(path: &Path, name: &CStr, value: &[u8]) {
        let f = std::fs::File::open(path).unwrap();
        sys::set_xattr(f.as_raw_fd(), name, value).unwrap();
    }

    /// Version 2; owner rwx, group r-x, group 4 r-x, mask, other.
    fn acl_with_group(gid: u32) -> Vec<u8> {
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (0x01u16, 7u16, u32::MAX),
            (0x04, 5, u32::MAX),
            (0x08, 5, gid),
            (0x10, 5, u32::MAX),
            (0x20, 5, u32::MAX),
        ] {
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(id.to_le_bytes());
        }
        acl
    }

    /// A small root filesystem as an image unpacks it (root-owned, a set-uid binary with a
    /// capability and a second link, a directory with ACLs, a symlink, a pipe) plus a file owned
    /// by an id outside the map.
    fn image_tree(root: &Path) {
        use std::os::unix::fs::{chown, PermissionsExt};
        for d in ["etc", "usr/bin", "var/log/journal", "run", "home/x"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("etc/shadow"), "root:*:1::::::\n").unwrap();
        chown(root.join("etc/shadow"), Some(0), Some(42)).unwrap();
        std::fs::set_permissions(
            root.join("etc/shadow"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        let passwd = root.join("usr/bin/passwd");
        std::fs::write(&passwd, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&passwd, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let mut caps = (0x0200_0000u32 | 1).to_le_bytes().to_vec();
        caps.extend(0x2000u32.to_le_bytes());
        caps.extend([0u8; 12]);
        set(&passwd, XATTR_CAPS, &caps);
        std::fs::hard_link(&passwd, root.join("usr/bin/chfn")).unwrap();
        let journal = root.join("var/log/journal");
        chown(&journal, Some(0), Some(999)).unwrap();
        std::fs::set_permissions(&journal, std::fs::Permissions::from_mode(0o2755)).unwrap();
        set(&journal, XATTR_ACL_ACCESS, &acl_with_group(4));
        set(&journal, XATTR_ACL_DEFAULT, &acl_with_group(4));
        std::os::unix::fs::symlink("/usr/share/zoneinfo/UTC", root.join("etc/localtime")).unwrap();
        nix::unistd::mkfifo(&root.join("run/initctl"), Mode::from_bits_truncate(0o600)).unwrap();
        std::fs::write(root.join("home/x/outside"), "").unwrap();
        chown(root.join("home/x/outside"), Some(70_000), Some(70_000)).unwrap();
    }

    #[test]
    fn a_tree_moves_into_the_range_keeping_set_id_bits_links_acls_and_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        image_tree(&root);
        let (u, g) = (1_065_536, 2_065_536);

        let done = shift_tree(&root, &map()).unwrap();
        // Every inode but the outsider, the second link once: rootfs, etc, shadow, localtime,
        // usr, bin, passwd(=chfn), var, log, journal, run, initctl, home, x.
        assert_eq!(
            done,
            Shifted {
                files: 14,
                caps: 1,
                acls: 1
            }
        );
        assert_eq!(owner(&root), (u, g, 0o755));
        assert_eq!(owner(&root.join("etc/shadow")), (u, g + 42, 0o640));
        assert_eq!(owner(&root.join("usr/bin/passwd")), (u, g, 0o4755));
        assert_eq!(owner(&root.join("usr/bin/chfn")), (u, g, 0o4755));
        assert_eq!(owner(&root.join("var/log/journal")), (u, g + 999, 0o2755));
        assert_eq!(
            owner(&root.join("etc/localtime")).0,
            u,
            "the link itself moves"
        );
        assert_eq!(owner(&root.join("run/initctl")), (u, g, 0o600));
        assert_eq!(owner(&root.join("home/x/outside")), (70_000, 70_000, 0o644));
        let caps = xattr(&root.join("usr/bin/passwd"), XATTR_CAPS).expect("capability kept");
        assert_eq!(caps, namespaced_caps(&caps[..20], u));
        for acl in [XATTR_ACL_ACCESS, XATTR_ACL_DEFAULT] {
            assert_eq!(
                xattr(&root.join("var/log/journal"), acl),
                Some(acl_with_group(g + 4))
            );
        }

        // Again (a walk cut short and redone): nothing moves twice, nothing is lost.
        let again = shift_tree(&root, &map()).unwrap();
        assert_eq!(
            again,
            Shifted {
                files: 0,
                caps: 0,
                acls: 0
            }
        );
        assert_eq!(owner(&root.join("usr/bin/passwd")), (u, g, 0o4755));
        assert_eq!(
            xattr(&root.join("usr/bin/passwd"), XATTR_CAPS),
            Some(caps.clone())
        );
        assert_eq!(
            xattr(&root.join("var/log/journal"), XATTR_ACL_ACCESS),
            Some(acl_with_group(g + 4))
        );

        // Into another range, as for a copy of a started template: every moved id moves on,
        // the capability's owner with them.
        let onward = shift_tree(&root, &Remap::new(NEXT, OTHER).unwrap()).unwrap();
        assert_eq!(onward, done);
        let o = 3_000_000;
        assert_eq!(owner(&root.join("etc/shadow")), (o, o + 42, 0o640));
        assert_eq!(owner(&root.join("usr/bin/passwd")), (o, o, 0o4755));
        assert_eq!(owner(&root.join("home/x/outside")), (70_000, 70_000, 0o644));
        assert_eq!(
            xattr(&root.join("usr/bin/passwd"), XATTR_CAPS),
            Some(namespaced_caps(&caps[..20], o))
        );
        assert_eq!(
            xattr(&root.join("var/log/journal"), XATTR_ACL_DEFAULT),
            Some(acl_with_group(o + 4))
        );
    }

    #[test]
    fn another_filesystem_inside_the_root_stops_the_walk_and_a_missing_root_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        let mnt = root.join("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        let mount = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "tmpfs"])
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(mount.success(), "mount a tmpfs (the tests run as root)");
        let walk = shift_tree(&root, &map());
        let umount = std::process::Command::new("umount")
            .arg(&mnt)
            .status()
            .unwrap();
        assert!(umount.success());
        match walk {
            Err(ShiftError::Nested(p)) => assert_eq!(p, mnt),
            other => panic!("expected a nested filesystem, got {other:?}"),
        }

        match shift_tree(&dir.path().join("missing"), &map()) {
            Err(ShiftError::Io { path, source }) => {
                assert_eq!(path, dir.path().join("missing"));
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected not found, got {other:?}"),
        }
    }

    #[test]
    fn ids_inside_the_map_move_and_others_stay() {
        let m = map();
        assert_eq!(m.uid(0), Some(1_065_536));
        assert_eq!(m.uid(65535), Some(1_131_071));
        assert_eq!(m.uid(65536), None);
        assert_eq!(m.gid(4), Some(2_065_540));
        assert_eq!(m.uid(1_065_536), None, "a moved id never moves again");
        assert_eq!(m.root(), Some(1_065_536));
    }

    /// A second range, as a copy of a started template would have next to the template's.
    const OTHER: &str =
        r#"[{"Isuid":true,"Isgid":true,"Hostid":3000000,"Nsid":0,"Maprange":65536}]"#;

    #[test]
    fn files_of_one_range_move_to_another_through_the_container_ids() {
        let m = Remap::new(NEXT, OTHER).unwrap();
        assert_eq!(m.uid(1_065_536), Some(3_000_000));
        assert_eq!(m.uid(1_066_536), Some(3_001_000));
        assert_eq!(m.gid(2_065_540), Some(3_000_004));
        assert_eq!(m.uid(0), None, "an id outside the files' map stays");
        assert_eq!(m.uid(3_000_000), None, "a moved id never moves again");
        assert_eq!(m.root(), Some(3_000_000));
    }

    #[test]
    fn maps_that_could_move_an_id_twice_or_nothing_are_refused() {
        let overlapping =
            r#"[{"Isuid":true,"Isgid":true,"Hostid":100000,"Nsid":0,"Maprange":1000000000}]"#;
        assert!(Remap::new("[]", overlapping).unwrap_err().contains("meet"));
        assert!(Remap::new(NEXT, NEXT).unwrap_err().contains("meet"));
        assert!(Remap::new(NEXT, "[]").unwrap_err().contains("empty"));
        assert!(Remap::new("[]", "not json").is_err());
        assert!(Remap::new("{", NEXT).is_err());
    }

    #[test]
    fn acl_entries_for_users_and_groups_move() {
        // version 2; USER_OBJ rwx; USER 1000 r; GROUP_OBJ r-x; GROUP 4 r-x; MASK; OTHER.
        let mut acl = 2u32.to_le_bytes().to_vec();
        for (tag, perm, id) in [
            (0x01u16, 7u16, u32::MAX),
            (0x02, 4, 1000),
            (0x04, 5, u32::MAX),
            (0x08, 5, 4),
            (0x10, 5, u32::MAX),
            (0x20, 5, u32::MAX),
        ] {
            acl.extend(tag.to_le_bytes());
            acl.extend(perm.to_le_bytes());
            acl.extend(id.to_le_bytes());
        }
        let moved = shift_acl(&acl, &map()).unwrap();
        let id =
            |i: usize| u32::from_le_bytes(moved[4 + 8 * i + 4..4 + 8 * i + 8].try_into().unwrap());
        assert_eq!(id(1), 1_066_536);
        assert_eq!(id(3), 2_065_540);
        for i in [0, 2, 4, 5] {
            assert_eq!(id(i), u32::MAX, "entry {i} has no id");
        }
        assert_eq!(moved[..4], acl[..4]);
        // Only the qualifiers of owner, group, mask and other: nothing moves.
        let plain: Vec<u8> = acl[..12].iter().chain(&acl[20..28]).copied().collect();
        assert_eq!(shift_acl(&plain, &map()), None);
        assert_eq!(
            shift_acl(&acl[..7], &map()),
            None,
            "a torn ACL is left alone"
        );
    }

    #[test]
    fn capabilities_become_revision_3_owned_by_the_containers_root() {
        // Revision 2, effective, cap_net_raw permitted.
        let mut v2 = (0x0200_0000u32 | 1).to_le_bytes().to_vec();
        v2.extend(0x2000u32.to_le_bytes());
        v2.extend([0u8; 12]);
        let v3 = namespaced_caps(&v2, 1_065_536);
        assert_eq!(v3.len(), 24);
        assert_eq!(u32::from_le_bytes(v3[..4].try_into().unwrap()), 0x0300_0001);
        assert_eq!(v3[4..20], v2[4..20]);
        assert_eq!(u32::from_le_bytes(v3[20..].try_into().unwrap()), 1_065_536);
    }
}
