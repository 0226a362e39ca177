//! Which daemon answers on the socket (LXD, or Incus, the community fork Debian moves its users
//! to) and what the agent does differently for it. Every difference between the two is decided
//! here, from what the daemon reports in `GET /1.0`; the rest of the agent asks a [`Daemon`],
//! never a name or a version string.

use std::path::{Path, PathBuf};

use super::server::ServerInfo;

/// The subordinate ids LXD may hand out: root's range in both `/etc/subuid` and `/etc/subgid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubidRange {
    pub start: u64,
    pub size: u64,
}

/// The two daemons of one lineage the agent drives through the same REST API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonKind {
    Lxd,
    Incus,
}

impl DaemonKind {
    /// As `GET /1.0` names it (`environment.server`), and as the inventory reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            DaemonKind::Lxd => "lxd",
            DaemonKind::Incus => "incus",
        }
    }

    /// As people write it.
    pub fn title(self) -> &'static str {
        match self {
            DaemonKind::Lxd => "LXD",
            DaemonKind::Incus => "Incus",
        }
    }

    /// The other daemon's usual socket on this host, when it is installed beside this one.
    fn neighbour_socket(self) -> PathBuf {
        match self {
            DaemonKind::Lxd => std::env::var_os("INCUS_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/lib/incus"))
                .join("unix.socket"),
            DaemonKind::Incus => PathBuf::from("/var/lib/lxd/unix.socket"),
        }
    }
}

/// A header of the file API that says how to write a file or what was read: LXD names them
/// `X-LXD-*`, Incus `X-Incus-*` (and reads no other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileHeader {
    Type,
    Write,
    Mode,
    Uid,
    Gid,
}

/// The daemon behind the agent's socket and what follows from what it reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Daemon {
    pub kind: DaemonKind,
    /// `environment.server_version` (`5.0.2`, `6.0.4`).
    pub version: String,
    /// Whether the other daemon of the pair runs on this host too: both hand out isolated id
    /// ranges from root's one line in `/etc/subuid`, so each then keeps to its own half.
    pub shares_host: bool,
}

impl Daemon {
    /// From `GET /1.0`. A daemon that names no `server` is an LXD from before it did.
    pub fn from_info(info: &ServerInfo, shares_host: bool) -> Daemon {
        let kind = match info.environment.server.as_str() {
            "incus" => DaemonKind::Incus,
            _ => DaemonKind::Lxd,
        };
        Daemon {
            kind,
            version: info.environment.server_version.clone(),
            shares_host,
        }
    }

    /// [`Daemon::from_info`], with whether the other daemon's socket exists on this host.
    pub fn detect(info: &ServerInfo, own_socket: &Path) -> Daemon {
        let mut daemon = Daemon::from_info(info, false);
        let other = daemon.kind.neighbour_socket();
        daemon.shares_host = other != own_socket && other.exists();
        daemon
    }

    /// `LXD 5.0.2`, `Incus 6.0.4`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.title(), self.version)
    }

    /// Whether this release tests a filesystem for idmapped mounts with a user namespace it
    /// writes no mapping into. Newer kernels (6.18 here) refuse such a mount, and these releases
    /// then chown every file of a new container on its first start instead of mounting it
    /// idmapped. LXD fixed it in 5.0.4, 5.21.2 and 6.1 (commit ec223f75, "Make get_userns_fd
    /// configure the userns"); Incus 6.0 mounts idmapped on the same kernel (a new container's
    /// files stay owned by 0 and its `volatile.last_state.idmap` is `[]`).
    pub fn probes_idmap_unmapped(&self) -> bool {
        self.kind == DaemonKind::Lxd && lxd_release_probes_unmapped(&self.version)
    }

    /// The name of a file API header on this daemon.
    pub fn file_header(&self, header: FileHeader) -> &'static str {
        use FileHeader::*;
        match (self.kind, header) {
            (DaemonKind::Lxd, Type) => "X-LXD-type",
            (DaemonKind::Lxd, Write) => "X-LXD-write",
            (DaemonKind::Lxd, Mode) => "X-LXD-mode",
            (DaemonKind::Lxd, Uid) => "X-LXD-uid",
            (DaemonKind::Lxd, Gid) => "X-LXD-gid",
            (DaemonKind::Incus, Type) => "X-Incus-type",
            (DaemonKind::Incus, Write) => "X-Incus-write",
            (DaemonKind::Incus, Mode) => "X-Incus-mode",
            (DaemonKind::Incus, Uid) => "X-Incus-uid",
            (DaemonKind::Incus, Gid) => "X-Incus-gid",
        }
    }

    /// Where the daemon keeps each instance's log directory, which holds the pid file of its file
    /// helper (`forkfile.pid`): `logs/` beside the socket, or the packaged default for a daemon
    /// started without its directory variable. Both daemons serve files through that helper and
    /// both can lose its socket (see `instances::files`).
    pub fn instance_log_dirs(&self, daemon_dir: &Path) -> [PathBuf; 2] {
        let packaged = match self.kind {
            DaemonKind::Lxd => "/var/log/lxd",
            DaemonKind::Incus => "/var/log/incus",
        };
        [daemon_dir.join("logs"), PathBuf::from(packaged)]
    }

    /// The part of root's subordinate ids this daemon's isolated containers get their ranges
    /// from: all of `host`, or, when the other daemon shares the host, LXD the lower half and
    /// Incus the upper one, so a container of one never gets the host ids of a container of the
    /// other (each daemon alone would start at the same first range).
    pub fn idmap_window(&self, host: SubidRange) -> SubidRange {
        if !self.shares_host {
            return host;
        }
        let half = host.size / 2;
        match self.kind {
            DaemonKind::Lxd => SubidRange {
                start: host.start,
                size: half,
            },
            DaemonKind::Incus => SubidRange {
                start: host.start + half,
                size: host.size - half,
            },
        }
    }
}

/// The LXD releases of [`Daemon::probes_idmap_unmapped`], by version.
pub fn lxd_release_probes_unmapped(version: &str) -> bool {
    let mut parts = version
        .split('.')
        .map(|p| p.trim().parse::<u32>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    match (major, minor) {
        (5, 0) => patch < 4,
        (5, 21) => patch < 2,
        (5, m) => m < 21,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn info(server: Option<&str>, version: &str) -> ServerInfo {
        let mut env = json!({"server_version": version});
        if let Some(s) = server {
            env["server"] = s.into();
        }
        serde_json::from_value(json!({"api_extensions": [], "environment": env})).unwrap()
    }

    #[test]
    fn the_daemon_is_told_by_what_it_reports() {
        let lxd = Daemon::from_info(&info(Some("lxd"), "5.0.2"), false);
        assert_eq!(
            (lxd.kind, lxd.describe().as_str()),
            (DaemonKind::Lxd, "LXD 5.0.2")
        );
        let old = Daemon::from_info(&info(None, "4.0.9"), false);
        assert_eq!(old.kind, DaemonKind::Lxd);
        let incus = Daemon::from_info(&info(Some("incus"), "6.0.4"), false);
        assert_eq!(
            (incus.kind, incus.describe().as_str()),
            (DaemonKind::Incus, "Incus 6.0.4")
        );
    }

    #[test]
    fn only_lxd_releases_before_the_fix_probe_unmapped() {
        for v in ["5.0.2", "5.0.3", "5.20", "5.21.1"] {
            assert!(
                Daemon::from_info(&info(Some("lxd"), v), false).probes_idmap_unmapped(),
                "{v}"
            );
        }
        for v in ["5.0.4", "5.21.2", "6.1"] {
            assert!(
                !Daemon::from_info(&info(Some("lxd"), v), false).probes_idmap_unmapped(),
                "{v}"
            );
        }
        // Incus numbers its releases apart from LXD: its 0.x, 5.x and 6.0 are not LXD's.
        for v in ["0.6", "5.0.2", "6.0.4"] {
            assert!(
                !Daemon::from_info(&info(Some("incus"), v), false).probes_idmap_unmapped(),
                "{v}"
            );
        }
    }

    #[test]
    fn two_daemons_on_one_host_split_roots_ids() {
        let host = SubidRange {
            start: 100_000,
            size: 10_000_001,
        };
        let lxd = Daemon::from_info(&info(Some("lxd"), "5.0.2"), true).idmap_window(host);
        let incus = Daemon::from_info(&info(Some("incus"), "6.0.4"), true).idmap_window(host);
        assert_eq!(lxd.start, host.start);
        assert_eq!(lxd.start + lxd.size, incus.start, "adjacent, no overlap");
        assert_eq!(incus.start + incus.size, host.start + host.size);
        let alone = Daemon::from_info(&info(Some("incus"), "6.0.4"), false).idmap_window(host);
        assert_eq!(alone, host);
    }

    #[test]
    fn file_headers_carry_each_daemons_name() {
        let lxd = Daemon::from_info(&info(Some("lxd"), "5.0.2"), false);
        let incus = Daemon::from_info(&info(Some("incus"), "6.0.4"), false);
        assert_eq!(lxd.file_header(FileHeader::Mode), "X-LXD-mode");
        assert_eq!(incus.file_header(FileHeader::Mode), "X-Incus-mode");
        assert_eq!(incus.file_header(FileHeader::Write), "X-Incus-write");
    }

    #[test]
    fn the_helpers_logs_are_where_each_daemon_keeps_them() {
        let incus = Daemon::from_info(&info(Some("incus"), "6.0.4"), false);
        assert_eq!(
            incus.instance_log_dirs(Path::new("/var/lib/incus")),
            [
                PathBuf::from("/var/lib/incus/logs"),
                PathBuf::from("/var/log/incus")
            ]
        );
    }
}
