//! `cohort-agent doctor`: checks that this machine can run Cohort's containers (LXD, its version
//! and extensions, the storage pool and its driver, the project, the kernel settings many system
//! containers need, the idmap range, the NVIDIA tools and NVML), each with the fix.

use std::path::Path;

use crate::config::AgentConfig;
use crate::lxd::Lxd;

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

#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub detail: String,
    /// What to do about a WARN or FAIL; empty when OK.
    pub fix: String,
}

fn check(name: &str, level: Level, detail: impl Into<String>, fix: impl Into<String>) -> Check {
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
    checks.push(match crate::gpu::find_on_path("nvidia-container-cli") {
        Some(p) => check(
            "NVIDIA container tools",
            Level::Ok,
            p.display().to_string(),
            "",
        ),
        None => check(
            "NVIDIA container tools",
            Level::Warn,
            "nvidia-container-cli not on PATH: nvidia.runtime cannot work, no GPU containers here",
            "install libnvidia-container-tools (NVIDIA's container toolkit repository)",
        ),
    });
    let inv = crate::gpu::inventory(config.nvml_library.as_deref());
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
    let mut out = vec![check(
        "LXD reachable",
        Level::Ok,
        socket.display().to_string(),
        "",
    )];
    let missing = info.missing_extensions();
    out.push(if missing.is_empty() {
        check(
            "LXD version and extensions",
            Level::Ok,
            format!(
                "LXD {}, all required extensions",
                info.environment.server_version
            ),
            "",
        )
    } else {
        check(
            "LXD version and extensions",
            Level::Fail,
            format!(
                "LXD {} lacks: {}",
                info.environment.server_version,
                missing.join(", ")
            ),
            "upgrade LXD to 5.0 or later",
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
    let project = format!("/1.0/projects/{}", crate::lxd::encode(&config.lxd_project));
    out.push(match lxd.get(&project).await {
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

/// `security.idmap.isolated` needs a large subordinate id range for root.
pub fn idmap_check(subuid: &Path) -> Check {
    let want: u64 = 65_536 * 100;
    let range = std::fs::read_to_string(subuid).ok().and_then(|text| {
        text.lines()
            .filter_map(|l| l.strip_prefix("root:"))
            .filter_map(|r| r.split(':').nth(1)?.parse::<u64>().ok())
            .max()
    });
    let fix = "add root:1000000:1000000000 to /etc/subuid and /etc/subgid, then restart LXD";
    match range {
        Some(n) if n >= want => check("idmap range for root", Level::Ok, format!("{n} ids"), ""),
        Some(n) => check(
            "idmap range for root",
            Level::Warn,
            format!("{n} ids: room for fewer than 100 isolated containers"),
            fix,
        ),
        None => check(
            "idmap range for root",
            Level::Warn,
            format!("no root entry in {}", subuid.display()),
            fix,
        ),
    }
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
    }
}
