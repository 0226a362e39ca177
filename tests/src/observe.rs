//! Helpers for the observability tests: the test NVML library built from
//! `agent/testdata/fake_nvml.c`, `promtool check metrics`, metric names in an exposition, and
//! the host PID of a process started inside a container, and a process's memory from `/proc`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Compiles the test NVML library into `dir` and returns its path.
pub fn build_fake_nvml(dir: &std::path::Path) -> PathBuf {
    let lib = dir.join("libfake_nvml.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../agent/testdata/fake_nvml.c");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("run cc (scripts/setup installs gcc)");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

/// Runs `promtool check metrics` on `text`; panics with its complaints unless it passes.
pub fn promtool_check(what: &str, text: &str) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (scripts/setup installs the prometheus package)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write metrics");
    let out = child.wait_with_output().expect("promtool ends");
    assert!(
        out.status.success(),
        "promtool check metrics on {what} failed:\n{}{}\n--- text ---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The sample names in an exposition (`name{...} v` and `name v` lines).
pub fn sample_names(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(String::from)
        .collect()
}

/// The value of the sample `name` whose labels include every `label="value"` of `labels`.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            return None;
        }
        if !labels
            .iter()
            .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        {
            return None;
        }
        rest.rsplit(' ').next()?.parse().ok()
    })
}

/// Starts `sleep 3600` inside `instance` (of `project`) and returns its PID on the host, found
/// through the PID namespace of the container's init (not through cgroups, which the code under
/// test reads).
pub fn start_sleep_in(project: &str, instance: &str) -> u32 {
    start_sleep_via(&|args| crate::lxd::lxc(args), project, instance)
}

/// [`start_sleep_in`] for `instance` of `lxd`'s project, on its daemon (LXD or Incus).
pub fn start_sleep_on(lxd: &crate::TestLxd, instance: &str) -> u32 {
    start_sleep_via(&|args| lxd.daemon().run(args), lxd.project(), instance)
}

/// [`start_sleep_in`] with `lxc` running the client of the container's daemon.
fn start_sleep_via(lxc: &dyn Fn(&[&str]) -> String, project: &str, instance: &str) -> u32 {
    let out = lxc(&[
        "exec",
        instance,
        "--project",
        project,
        "--",
        "sh",
        "-c",
        "sleep 3600 >/dev/null 2>&1 </dev/null & echo $!",
    ]);
    let inner: u32 = out.trim().parse().expect("pid inside the container");
    let state = lxc(&[
        "query",
        &format!("/1.0/instances/{instance}/state?project={project}"),
    ]);
    let state: serde_json::Value = serde_json::from_str(&state).expect("state json");
    let init = state["pid"].as_u64().expect("init pid");
    let ns = std::fs::read_link(format!("/proc/{init}/ns/pid")).expect("init pid namespace");
    for entry in std::fs::read_dir("/proc").expect("/proc") {
        let Some(pid) = entry
            .ok()
            .and_then(|e| e.file_name().to_str()?.parse::<u32>().ok())
        else {
            continue;
        };
        if std::fs::read_link(format!("/proc/{pid}/ns/pid"))
            .ok()
            .as_ref()
            != Some(&ns)
        {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let nspid_last = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|l| l.split_whitespace().last()?.parse::<u32>().ok());
        if nspid_last == Some(inner) {
            return pid;
        }
    }
    panic!("no host process for pid {inner} of {instance}");
}

/// A size field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in kB; `None` when the process or
/// the field is not there.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
