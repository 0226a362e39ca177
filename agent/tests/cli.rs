//! The command line on this machine: `doctor` against the real daemons (Incus by default, LXD
//! when named, and failing without one), and `join` refusing a controller whose CA does not match the token's fingerprint, writing
//! nothing.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

use base64::Engine;

fn agent(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cohort-agent"));
    // Wide enough that no row of doctor's table wraps (a pipe gets 80 columns otherwise).
    cmd.args(args)
        .env_remove("COHORT_AGENT_NVML_LIBRARY")
        .env("COLUMNS", "400");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run cohort-agent")
}

fn row<'a>(table: &'a str, check: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.contains(check))
        .unwrap_or_else(|| panic!("no {check:?} row in:\n{table}"))
}

/// LXD's socket on this machine: `LXD_DIR`'s, else Debian's, else the snap's.
fn lxd_socket() -> String {
    let dir = std::env::var("LXD_DIR").ok().unwrap_or_else(|| {
        ["/var/lib/lxd", "/var/snap/lxd/common/lxd"]
            .into_iter()
            .find(|d| std::path::Path::new(&format!("{d}/unix.socket")).exists())
            .unwrap_or("/var/lib/lxd")
            .to_string()
    });
    format!("{dir}/unix.socket")
}

#[test]
fn doctor_reports_this_machine() {
    // scripts/setup starts LXD and Incus side by side; with neither named, the agent takes
    // Incus's socket. No node network: the default bridge (cohort0) may be the LXD quickstart's,
    // which Incus does not manage (agent_network tests the network checks).
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cohort-agent"));
    cmd.arg("doctor")
        .env_remove("COHORT_AGENT_NVML_LIBRARY")
        .env("COLUMNS", "400")
        .env("COHORT_AGENT_NETWORK_MODE", "none");
    for var in ["COHORT_AGENT_LXD_SOCKET", "LXD_DIR", "INCUS_DIR"] {
        cmd.env_remove(var);
    }
    let out = cmd.output().expect("run cohort-agent");
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "doctor failed here:\n{table}");
    let reachable = row(&table, "LXD reachable");
    assert!(
        reachable.contains("OK") && reachable.contains("Incus at /var/lib/incus/unix.socket"),
        "{reachable}"
    );
    assert!(row(&table, "daemon and extensions").contains("Incus 6."));
    assert!(row(&table, "storage pool").contains("btrfs"));
    assert!(row(&table, "fs.inotify.max_user_instances").contains("OK"));
    let nvml = row(&table, "NVML");
    assert!(
        nvml.contains("WARN") && nvml.contains("NVML could not be loaded"),
        "{nvml}"
    );
    assert!(row(&table, "NVIDIA container toolkit").contains("WARN"));
}

/// Runs `lxc` on this machine's LXD; its stdout, or a panic with its stderr.
fn lxc(args: &[&str]) -> String {
    let out = Command::new("lxc").args(args).output().expect("run lxc");
    assert!(
        out.status.success(),
        "lxc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Deletes the container it names when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("lxc").args(["delete", "-f", &self.0]).output();
    }
}

#[test]
fn doctor_warns_exactly_when_lxd_remaps_a_new_containers_files() {
    // LXD named, beside the Incus the agent would take by default.
    let out = agent(&["doctor"], &[("COHORT_AGENT_LXD_SOCKET", &lxd_socket())]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(row(&table, "daemon and extensions").contains("LXD 5."));
    let first = row(&table, "first start without remapping").to_string();

    // What LXD does here: an isolated container starts with its files unshifted (`[]`); LXD
    // either mounts them idmapped, leaving that as it is, or remaps them, recording the map.
    let c = Container(format!("doctor-remap-{}", std::process::id()));
    lxc(&[
        "init",
        "cohort/base",
        &c.0,
        "-s",
        "cohort",
        "-c",
        "security.idmap.isolated=true",
    ]);
    let key = "volatile.last_state.idmap";
    assert_eq!(lxc(&["config", "get", &c.0, key]).trim(), "[]");
    lxc(&["start", &c.0]);
    let after = lxc(&["config", "get", &c.0, key]);
    let remapped = after.trim() != "[]";
    assert_eq!(
        first.contains("WARN"),
        remapped,
        "doctor: {first}\n{key} after the first start: {after}"
    );
}

#[test]
fn doctor_fails_without_lxd() {
    let out = agent(
        &["doctor"],
        &[("COHORT_AGENT_LXD_SOCKET", "/nonexistent/unix.socket")],
    );
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout);
    let lxd = row(&table, "LXD reachable");
    assert!(
        lxd.contains("FAIL") && lxd.contains("/nonexistent/unix.socket"),
        "{lxd}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("Error: 1 check(s) failed"));
}

/// Serves `body` for every request on a loopback port (plain HTTP), for `count` requests.
fn serve_ca(body: String, count: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(count) {
            let mut s = stream.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = s.write_all(resp.as_bytes());
        }
    });
    port
}

fn token(url: &str, fingerprint: &str) -> String {
    let t = serde_json::json!({
        "controller_url": url,
        "ca_fingerprint": fingerprint,
        "node_name": "gpu-07",
        "secret": "one-time",
        "expires_at": (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339(),
    });
    base64::engine::general_purpose::STANDARD.encode(t.to_string())
}

#[test]
fn join_refuses_a_ca_that_does_not_match_the_token_and_writes_nothing() {
    let key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let port = serve_ca(ca.pem(), 2);
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("agent");
    let url = format!("http://127.0.0.1:{port}");

    let out = agent(
        &[
            "join",
            &token(&url, &"ab".repeat(32)),
            "--state-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Error: the controller's CA fingerprint is"),
        "{err}"
    );
    assert!(err.contains("refusing to enroll"), "{err}");
    assert!(!dir.exists(), "join wrote state despite the mismatch");

    // The right CA over plain HTTP still does not get the secret.
    let right = cohort_agent::enroll::ca_fingerprint(&ca.pem()).unwrap();
    let out = agent(
        &[
            "join",
            &token(&url, &right),
            "--state-dir",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not https"));
    assert!(!dir.exists());
}
