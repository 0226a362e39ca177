//! `cohort-agent doctor`: checks that this machine can run Cohort's containers (LXD, its version
//! and extensions, the storage pool and its driver, whether LXD can start a new container without
//! remapping its files, the project, the kernel settings many system containers need, the idmap
//! range, the NVIDIA tools and NVML, the node network, the SSH mode and the firewall), each with
//! the fix.

use std::path::Path;

use crate::config::AgentConfig;
use crate::idmap::probe::{first_start, FirstStart};
use crate::lxd::{Daemon, Lxd};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Level::Ok => "OK",
            Level::Warn => "WARN",
            Level::Fail => "FAIL",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub detail: String,
    /// What to do about a WARN or FAIL; empty when OK.
    pub fix: String,
}

pub(crate) fn check(
    name: &str,
    level: Level,
    detail: impl Into<String>,
    fix: impl Into<String>,
) -> Check {
    Check {
        name: name.into(),
        level,
        detail: detail.into(),
        fix: if level == Level::Ok {
            String::new()
        } else {
            fix.into()
        },
    }
}

/// Kernel settings from LXD's production setup (the values `scripts/setup` applies).
pub const SYSCTLS: &[(&str, u64)] = &[
    ("fs.inotify.max_queued_events", 1_048_576),
    ("fs.inotify.max_user_instances", 1_048_576),
    ("fs.inotify.max_user_watches", 1_048_576),
    ("vm.max_map_count", 262_144),
    ("kernel.keys.maxkeys", 2000),
    ("kernel.keys.maxbytes", 2_000_000),
];

/// Runs every check.
pub async fn run(config: &AgentConfig) -> Vec<Check> {
    let mut checks = lxd_checks(config).await;
    for (key, want) in SYSCTLS {
        checks.push(sysctl_check(Path::new("/proc/sys"), key, *want));
    }
    checks.push(idmap_check(Path::new("/etc/subuid")));
    checks.push(lxcfs_check(
        &std::fs::read_to_string("/proc/mounts").unwrap_or_default(),
        lxcfs_answers(),
    ));
    // Asked with a deadline: a wedged driver is a finding, not a doctor that never ends.
    let reader = crate::gpu::reader::NvmlReader::start(
        config.nvml_library.clone(),
        crate::gpu::reader::DEADLINE,
    );
    let inv = reader.read().await;
    checks.push(match (&inv.unavailable, inv.gpus.len()) {
        (None, n) => check(
            "NVML",
            Level::Ok,
            format!(
                "{n} GPU(s), driver {}",
                inv.driver_version.as_deref().unwrap_or("?")
            ),
            "",
        ),
        (Some(why), _) => check(
            "NVML",
            Level::Warn,
            why.clone(),
            "install the NVIDIA driver (libnvidia-ml.so) or set nvml_library",
        ),
    });
    let toolkit = crate::gpu::find_on_path("nvidia-container-cli");
    checks.push(crate::doctor_gpus::toolkit(
        toolkit.as_deref(),
        inv.gpus.len(),
    ));
    let smi = crate::gpu::find_on_path("nvidia-smi");
    checks.extend(crate::doctor_gpus::persistence(&inv, smi.as_deref()));
    checks.extend(crate::doctor_gpus::mig(&inv));
    checks
}

async fn lxd_checks(config: &AgentConfig) -> Vec<Check> {
    let socket = config.lxd_socket();
    let lxd = Lxd::new(&socket, &config.lxd_project);
    let info = match lxd.server_info().await {
        Ok(info) => info,
        Err(e) => {
            return vec![check(
                "LXD reachable",
                Level::Fail,
                e.to_string(),
                "start LXD (scripts/setup) or set lxd_socket / LXD_DIR",
            )]
        }
    };
    let daemon = Daemon::detect(&info, &socket);
    let mut out = vec![check(
        "LXD reachable",
        Level::Ok,
        format!("{} at {}", daemon.kind.title(), socket.display()),
        "",
    )];
    let missing = info.missing_extensions();
    out.push(if missing.is_empty() {
        check(
            "daemon and extensions",
            Level::Ok,
            format!("{}, all required extensions", daemon.describe()),
            "",
        )
    } else {
        check(
            "daemon and extensions",
            Level::Fail,
            format!("{} lacks: {}", daemon.describe(), missing.join(", ")),
            "upgrade to LXD 5.0 or Incus 6.0 or later",
        )
    });
    out.push(match lxd.pool_driver(&config.storage_pool).await {
        Ok(driver) if driver == "dir" => check(
            "storage pool",
            Level::Warn,
            format!("pool {} uses driver dir: every create copies the whole image, and root disk sizes are not enforced", config.storage_pool),
            "use a btrfs or zfs pool (scripts/setup makes a btrfs one)",
        ),
        Ok(driver) => check(
            "storage pool",
            Level::Ok,
            format!("pool {} ({driver})", config.storage_pool),
            "",
        ),
        Err(e) => check(
            "storage pool",
            Level::Fail,
            e.to_string(),
            "create the pool (scripts/setup) or set storage_pool",
        ),
    });
    let env = info.environment.clone();
    let pool_dir = config.pool_path();
    let probed = daemon.clone();
    // The release's test waits on a child process: off the async runtime.
    let how = tokio::task::spawn_blocking(move || first_start(&probed, &env, &pool_dir))
        .await
        .unwrap_or_else(|e| FirstStart::TestRefused(std::io::Error::other(e.to_string())));
    out.push(first_start_check(
        &daemon.describe(),
        &how,
        config.shift_before_first_start,
    ));
    out.extend(crate::network::doctor::checks(config, &lxd, &info.environment).await);
    out.push(match lxd.get_project(&config.lxd_project).await {
        Ok(_) => check("LXD project", Level::Ok, config.lxd_project.clone(), ""),
        Err(e) => check(
            "LXD project",
            Level::Fail,
            e.to_string(),
            format!(
                "lxc project create {} or set lxd_project",
                config.lxd_project
            ),
        ),
    });
    out
}

/// Where LXD and Incus look for lxcfs when they start.
pub const LXCFS_DIR: &str = "/var/lib/lxcfs";

/// Whether lxcfs's mount answers a read (within 5 s): a mount whose process died is still in
/// `/proc/mounts` but answers "Transport endpoint is not connected".
fn lxcfs_answers() -> bool {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let read = std::fs::read(format!("{LXCFS_DIR}/proc/meminfo")).is_ok_and(|b| !b.is_empty());
        let _ = tx.send(read);
    });
    rx.recv_timeout(std::time::Duration::from_secs(5))
        .unwrap_or(false)
}

/// lxcfs, from `/proc/mounts`' text and whether its mount `answers` a read: mounted where the
/// daemons look for it and alive, containers see their own memory and CPUs in `/proc` (`free`,
/// `nproc`); without it they see the host's, and a job that sizes itself from them is killed at
/// the container's limit.
pub fn lxcfs_check(mounts: &str, answers: bool) -> Check {
    let mounted = mounts.lines().any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        fields.next() == Some(LXCFS_DIR) && fields.next().is_some_and(|t| t == "fuse.lxcfs")
    });
    if mounted && !answers {
        check(
            "lxcfs",
            Level::Warn,
            format!("mounted on {LXCFS_DIR} but not answering (its process died): containers started now see the host's memory"),
            "umount -l /var/lib/lxcfs, start lxcfs again (scripts/setup does both)",
        )
    } else if mounted {
        check(
            "lxcfs",
            Level::Ok,
            format!("mounted on {LXCFS_DIR}: containers see their own memory and CPUs"),
            "",
        )
    } else {
        check(
            "lxcfs",
            Level::Warn,
            format!("not mounted on {LXCFS_DIR}: free and /proc/meminfo in containers show the host's memory"),
            "start lxcfs before LXD/Incus (scripts/setup does), then restart the daemon",
        )
    }
}

/// Compares `/proc/sys/<key>` with the wanted minimum.
pub fn sysctl_check(proc_sys: &Path, key: &str, want: u64) -> Check {
    let path = proc_sys.join(key.replace('.', "/"));
    let fix =
        format!("sysctl -w {key}={want} and add it to /etc/sysctl.d (scripts/setup does both)");
    match std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        Some(have) if have >= want => check(key, Level::Ok, have.to_string(), ""),
        Some(have) => check(
            key,
            Level::Warn,
            format!("{have}, below {want}: many system containers will not boot"),
            fix,
        ),
        None => check(key, Level::Warn, "not readable on this kernel", fix),
    }
}

/// `security.idmap.isolated` needs a large subordinate id range for root, and one: the lxd and
/// incus-base packages each add root a range when installed, and Incus 6.0.4 maps every one of
/// them from id 0, which `newuidmap` refuses, so no container without an isolated map starts.
pub fn idmap_check(subuid: &Path) -> Check {
    let want: u64 = 65_536 * 100;
    let ranges: Vec<(u64, u64)> = std::fs::read_to_string(subuid)
        .map(|text| {
            text.lines()
                .filter_map(|l| l.strip_prefix("root:"))
                .filter_map(|r| {
                    let (start, count) = r.split_once(':')?;
                    Some((start.parse().ok()?, count.trim().parse().ok()?))
                })
                .collect()
        })
        .unwrap_or_default();
    let name = "idmap range for root";
    let fix = "add root:1000000:1000000000 to /etc/subuid and /etc/subgid, then restart LXD";
    if ranges.len() > 1 {
        let lowest = ranges.iter().map(|r| r.0).min().unwrap_or(0);
        let end = ranges.iter().map(|r| r.0 + r.1).max().unwrap_or(0);
        return check(
            name,
            Level::Warn,
            format!(
                "{} root ranges in {}: Incus maps each from id 0 and refuses to start a \
                 container without an isolated map",
                ranges.len(),
                subuid.display()
            ),
            format!(
                "make them one line, root:{lowest}:{} (where they touch), in /etc/subuid and \
                 /etc/subgid, then restart LXD and Incus",
                end - lowest
            ),
        );
    }
    match ranges.first().map(|r| r.1) {
        Some(n) if n >= want => check(name, Level::Ok, format!("{n} ids"), ""),
        Some(n) => check(
            name,
            Level::Warn,
            format!("{n} ids: room for fewer than 100 isolated containers"),
            fix,
        ),
        None => check(
            name,
            Level::Warn,
            format!("no root entry in {}", subuid.display()),
            fix,
        ),
    }
}

/// The doctor's row for [`first_start`] of `daemon` (`LXD 5.0.2`): a warning wherever it remaps each new container's
/// files (seconds of a class's bring-up), saying who does that work.
pub fn first_start_check(daemon: &str, how: &FirstStart, agent_shifts: bool) -> Check {
    const NAME: &str = "first start without remapping";
    let who = if agent_shifts {
        "the agent moves them itself before the start (shift_before_first_start), about a \
         quarter of LXD's work, but they are still copied into each container's range"
    } else {
        "shift_before_first_start is off, so LXD does it on the start (about 0.5 s alone, \
         seconds when a class starts at once)"
    };
    let (detail, fix) = match how {
        FirstStart::Shiftfs => {
            return check(
                NAME,
                Level::Ok,
                format!("{daemon} mounts each container's root through shiftfs"),
                "",
            )
        }
        FirstStart::Idmapped => {
            return check(
                NAME,
                Level::Ok,
                format!("{daemon} mounts each container's root idmapped"),
                "",
            )
        }
        FirstStart::NoKernelSupport => (
            "the kernel has no idmapped mounts".to_string(),
            "a kernel with idmapped mounts (5.19 or later for btrfs, ext4 and xfs)",
        ),
        FirstStart::NoLxcSupport => (
            "liblxc has no idmapped mounts (LXD's lxc_features.idmapped_mounts_v2)".to_string(),
            "an LXD built with liblxc 5.0 or later",
        ),
        FirstStart::TestRefused(e) => (
            format!(
                "{daemon} tests idmapped mounts with an unmapped user namespace, which this \
                 kernel refuses ({e})"
            ),
            "upgrade LXD to 5.0.4, 5.21.2, 6.1 or later, whose test works on this kernel",
        ),
    };
    check(
        NAME,
        Level::Warn,
        format!(
            "{detail}: {daemon} remaps every file of each new container on its first start instead \
             of mounting it idmapped; {who}"
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysctl_below_minimum_warns_with_fix() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("fs/inotify")).unwrap();
        std::fs::write(dir.path().join("fs/inotify/max_user_instances"), "128\n").unwrap();
        let c = sysctl_check(dir.path(), "fs.inotify.max_user_instances", 1_048_576);
        assert_eq!(c.level, Level::Warn);
        assert!(c
            .fix
            .contains("sysctl -w fs.inotify.max_user_instances=1048576"));
        std::fs::write(
            dir.path().join("fs/inotify/max_user_instances"),
            "2000000\n",
        )
        .unwrap();
        let c = sysctl_check(dir.path(), "fs.inotify.max_user_instances", 1_048_576);
        assert_eq!(c.level, Level::Ok);
        assert!(c.fix.is_empty());
    }

    #[test]
    fn idmap_range_is_read_from_subuid() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("subuid");
        std::fs::write(&f, "lxd:100000:65536\nroot:1000000:1000000000\n").unwrap();
        assert_eq!(idmap_check(&f).level, Level::Ok);
        std::fs::write(&f, "root:100000:65536\n").unwrap();
        assert_eq!(idmap_check(&f).level, Level::Warn);
        // What installing incus-base and then lxd leaves.
        std::fs::write(
            &f,
            "root:1000000:1000000000\n_lxd:1001000000:10000001\nroot:1001000000:10000001\n",
        )
        .unwrap();
        let c = idmap_check(&f);
        assert_eq!(c.level, Level::Warn);
        assert!(c.detail.starts_with("2 root ranges"), "{}", c.detail);
        assert!(c.fix.contains("root:1000000:1010000001"), "{}", c.fix);
    }

    #[test]
    fn the_releases_with_lxds_unmapped_idmap_test_are_known() {
        use crate::lxd::daemon::lxd_release_probes_unmapped;
        for v in ["5.0.0", "5.0.2", "5.0.3", "5.1", "5.20", "5.21.0", "5.21.1"] {
            assert!(lxd_release_probes_unmapped(v), "{v}");
        }
        for v in ["5.0.4", "5.0.5", "5.21.2", "5.21.3", "6.1", "6.5", "4.0.9"] {
            assert!(!lxd_release_probes_unmapped(v), "{v}");
        }
    }

    #[test]
    fn a_failed_unmapped_probe_warns_with_the_upgrade() {
        let refused = || FirstStart::TestRefused(std::io::Error::from_raw_os_error(libc::EINVAL));
        let c = first_start_check(concat!("LXD ", "5.0.2"), &refused(), true);
        assert_eq!(c.level, Level::Warn);
        assert!(c.detail.contains("LXD 5.0.2") && c.detail.contains("remaps"));
        assert!(
            c.detail.contains("the agent moves them itself"),
            "{}",
            c.detail
        );
        assert!(c.fix.contains("5.0.4"));
        let off = first_start_check(concat!("LXD ", "5.0.2"), &refused(), false);
        assert!(off.detail.contains("shift_before_first_start is off"));
        assert_eq!(
            first_start_check(concat!("LXD ", "6.1"), &FirstStart::Idmapped, true).level,
            Level::Ok
        );
        assert_eq!(
            first_start_check(concat!("LXD ", "5.0.2"), &FirstStart::Shiftfs, true).level,
            Level::Ok
        );
        let no_kernel =
            first_start_check(concat!("LXD ", "6.1"), &FirstStart::NoKernelSupport, true);
        assert_eq!(no_kernel.level, Level::Warn);
        assert!(no_kernel.detail.contains("no idmapped mounts"));
        let no_lxc = first_start_check(concat!("LXD ", "6.1"), &FirstStart::NoLxcSupport, true);
        assert_eq!(no_lxc.level, Level::Warn);
        assert!(no_lxc.detail.contains("liblxc"));
    }

    #[test]
    fn lxcfs_counts_only_its_own_mount_where_the_daemons_look() {
        let mounted = "proc /proc proc rw 0 0\nlxcfs /var/lib/lxcfs fuse.lxcfs rw,nosuid 0 0\n";
        assert_eq!(lxcfs_check(mounted, true).level, Level::Ok);
        let dead = lxcfs_check(mounted, false);
        assert_eq!(dead.level, Level::Warn);
        assert!(dead.detail.contains("not answering"), "{}", dead.detail);
        let elsewhere = "lxcfs /mnt/lxcfs fuse.lxcfs rw 0 0\ntmpfs /var/lib/lxcfs tmpfs rw 0 0\n";
        let c = lxcfs_check(elsewhere, true);
        assert_eq!(c.level, Level::Warn);
        assert!(c.fix.contains("scripts/setup"), "{c:?}");
        assert_eq!(lxcfs_check("", false).level, Level::Warn);
    }
}
