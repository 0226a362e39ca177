//! Which container a host process belongs to, from `/proc/<pid>/cgroup`. LXD (through liblxc)
//! puts a container's processes under `lxc.payload.<container>` in every hierarchy, where
//! `<container>` is `<project>_<name>` outside the default project, and liblxc appends `-<n>`
//! when a stale cgroup of the same name was still there at start (seen on this host with
//! cgroup v1: `lxc.payload.cohort-quickstart_demo101-alice-2`).

use std::path::Path;

/// The container name in one `/proc/<pid>/cgroup` text, as liblxc wrote it (project prefix and
/// any `-<n>` suffix included).
pub fn payload_name(cgroup: &str) -> Option<&str> {
    cgroup.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let rest = path.split("lxc.payload.").nth(1)?;
        rest.split('/').next().filter(|n| !n.is_empty())
    })
}

/// The instance of `project` among `instances` that `payload` (from [`payload_name`]) names.
pub fn instance_of<'a>(payload: &str, project: &str, instances: &'a [String]) -> Option<&'a str> {
    let local = if project == "default" {
        payload
    } else {
        payload.strip_prefix(project)?.strip_prefix('_')?
    };
    if let Some(exact) = instances.iter().find(|i| i.as_str() == local) {
        return Some(exact);
    }
    // liblxc's `-<n>` suffix for a reused cgroup name.
    let (base, n) = local.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    instances
        .iter()
        .find(|i| i.as_str() == base)
        .map(String::as_str)
}

/// The instance of `project` that host process `pid` runs in, if any.
pub fn instance_of_pid(
    proc_root: &Path,
    pid: u32,
    project: &str,
    instances: &[String],
) -> Option<String> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    instance_of(payload_name(&text)?, project, instances).map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "9:name=systemd:/lxc.payload.p1_demo-alice-2/system.slice/a.service\n\
                      1:cpu:/lxc.payload.p1_demo-alice-2\n0::/lxc.payload.p1_demo-alice-2/x";

    #[test]
    fn finds_the_payload_in_v1_and_v2_lines() {
        assert_eq!(payload_name(V1), Some("p1_demo-alice-2"));
        assert_eq!(payload_name("0::/lxc.payload.c1/init.scope"), Some("c1"));
        assert_eq!(payload_name("0::/user.slice/session-1.scope"), None);
    }

    #[test]
    fn maps_to_the_instance_of_the_project_only() {
        let names = vec!["demo-alice".to_string(), "demo-alice-2".to_string()];
        // An exact name wins over the suffix reading.
        assert_eq!(
            instance_of("p1_demo-alice-2", "p1", &names),
            Some("demo-alice-2")
        );
        let only = vec!["demo-alice".to_string()];
        assert_eq!(
            instance_of("p1_demo-alice-2", "p1", &only),
            Some("demo-alice")
        );
        assert_eq!(instance_of("p2_demo-alice", "p1", &only), None);
        assert_eq!(
            instance_of("demo-alice", "default", &only),
            Some("demo-alice")
        );
        assert_eq!(instance_of("demo-alice-x", "default", &only), None);
    }
}
