//! Issue 46: the `incus` client (6.0, the one Debian moves admins to), joined to Cohort's
//! LXD-style API with a token, runs the verbs the issue lists: `list` with IPv4, state and usage
//! in the JSON, `console --show-log`, `monitor` with lifecycle events, `copy`/`rename` refused
//! with the reason and `move --target` reaching Cohort's move, `image export` byte for byte,
//! `network list` and `storage list`, deleting a running container refused with LXD's 400, and
//! an operation readable once it has ended. Its configuration is a directory of its own
//! (`INCUS_CONF`), never the machine's remotes.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::cli_support::{curl_as, eth0_address, token_of, OneNode};
use cohort_e2e::TestNetwork;

/// The real `incus` client with its own configuration directory.
struct Incus {
    conf: tempfile::TempDir,
}

impl Incus {
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("incus");
        command.args(args).env("INCUS_CONF", self.conf.path());
        command
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run incus")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "incus {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn fails(&self, args: &[&str], message: &str) {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "incus {args:?} succeeded");
        assert!(
            stderr.contains(message),
            "incus {args:?}: {stderr:?} lacks {message:?}"
        );
        assert!(!stderr.contains("Not Found"), "{stderr}");
    }

    /// `curl` to the API with this client's certificate: the JSON answer and the status.
    fn curl(&self, address: &str, path: &str, extra: &[&str]) -> (serde_json::Value, u16) {
        curl_as(self.conf.path(), address, path, extra)
    }
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

/// What `incus monitor` prints while `change` runs, until `wanted` is in it (at most 120 s).
fn monitored(incus: &Incus, args: &[&str], change: impl FnOnce(), wanted: &[&str]) -> String {
    let mut watching = incus
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("incus monitor");
    let mut stdout = watching.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 || tx.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // The stream is open before the change (its first pass only records what is there).
    std::thread::sleep(Duration::from_secs(2));
    change();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = String::new();
    while !wanted.iter().all(|w| seen.contains(w)) && Instant::now() < deadline {
        if let Ok(bytes) = rx.recv_timeout(Duration::from_secs(5)) {
            seen.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    watching.kill().expect("end incus monitor");
    let _ = watching.wait();
    seen
}

#[test]
fn the_incus_client_runs_the_issues_verbs() {
    let net = TestNetwork::claim();
    let node = OneNode::start_with_lxd_api_on(&net);
    let address = node.controller.lxd_address.clone().expect("LXD-style API");
    let incus = Incus {
        conf: tempfile::tempdir().expect("incus conf dir"),
    };
    let token = token_of(&node.cli.ok(&["config", "trust", "add", "incus-admin"]));
    incus.ok(&["remote", "add", "lab", &token]);

    // Lifecycle events of a create, seen by `incus monitor --type lifecycle`.
    let seen = monitored(
        &incus,
        &["monitor", "lab:", "--type", "lifecycle"],
        || {
            incus.ok(&[
                "launch",
                "lab:cohort/base",
                "lab:web1",
                "-c",
                "limits.memory=256MiB",
            ]);
        },
        &[
            "instance-created",
            "instance-started",
            "/1.0/instances/web1",
        ],
    );
    for wanted in ["type: lifecycle", "instance-created", "instance-started"] {
        assert!(seen.contains(wanted), "{wanted} not in: {seen}");
    }

    // `list` with the node's state: IPv4 address, status and usage, in CSV and JSON.
    let ipv4 = eth0_address(&node.lxd, "web1");
    assert_eq!(
        incus.ok(&["list", "lab:", "-c", "n4s", "-f", "csv"]),
        format!("web1,{ipv4} (eth0),RUNNING\n")
    );
    let listed: serde_json::Value =
        serde_json::from_str(&incus.ok(&["list", "lab:", "-f", "json"])).expect("JSON");
    let state = &listed[0]["state"];
    assert_eq!(state["status"], "Running", "{state}");
    assert!(state["memory"]["usage"].as_u64() > Some(0), "{state}");
    assert!(state["processes"].as_i64() > Some(0), "{state}");
    let addresses = state["network"]["eth0"]["addresses"].to_string();
    assert!(addresses.contains(&ipv4), "{addresses}");

    // The console log LXD keeps, through the node's agent.
    incus.ok(&["console", "lab:web1", "--show-log"]);

    // What Cohort does not do is said with the reason; a move reaches Cohort's move.
    incus.fails(
        &["copy", "lab:web1", "lab:web2"],
        "Not supported by Cohort: copying",
    );
    incus.fails(
        &["rename", "lab:web1", "lab:web2"],
        "Not supported by Cohort: renaming",
    );
    incus.fails(
        &["move", "lab:web1", "--target", "node1"],
        "instance web1 is on node node1 already",
    );

    // Read-only networks and storage pools, one per node.
    let networks = incus.ok(&["network", "list", "lab:", "-f", "csv"]);
    assert!(networks.starts_with("node1,"), "{networks}");
    let pools = incus.ok(&["storage", "list", "lab:", "-f", "csv"]);
    assert!(pools.starts_with("node1,"), "{pools}");

    // `image export` gives back the bytes the catalog holds.
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("exported");
    incus.ok(&[
        "image",
        "export",
        "lab:cohort/base",
        target.to_str().unwrap(),
    ]);
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("exported"))
        .expect("an exported file");
    let listed = node.cli.ok(&["image", "list", "-f", "csv"]);
    let fingerprint = sha256_of(&file);
    assert!(
        listed.contains(&fingerprint[..12]),
        "{fingerprint} not in {listed}"
    );

    // A running container is not deleted: LXD's 400, which the client shows.
    let (refusal, status) = incus.curl(&address, "/1.0/instances/web1", &["-X", "DELETE"]);
    assert_eq!(status, 400, "{refusal}");
    incus.fails(&["delete", "lab:web1"], "stop it first");

    // A stop, and its operation still readable once it has ended.
    let seen = monitored(
        &incus,
        &["monitor", "lab:", "--type", "lifecycle"],
        || {
            incus.ok(&["stop", "lab:web1"]);
        },
        &["instance-stopped"],
    );
    assert!(seen.contains("instance-stopped"), "{seen}");
    let (ops, _) = incus.curl(&address, "/1.0/operations?recursion=1", &[]);
    let stop = ops["metadata"]["success"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|op| op["resources"]["instances"][0] == "/1.0/instances/web1")
        .max_by_key(|op| op["created_at"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("the stop among the ended operations: {ops}"))
        .clone();
    let id = stop["id"].as_str().expect("id");
    let shown = incus.ok(&["query", &format!("lab:/1.0/operations/{id}")]);
    let shown: serde_json::Value = serde_json::from_str(&shown).expect("JSON");
    assert_eq!(shown["status"], "Success", "{shown}");

    incus.ok(&["delete", "lab:web1"]);
    assert_eq!(incus.ok(&["list", "lab:", "-f", "csv"]), "");
}
