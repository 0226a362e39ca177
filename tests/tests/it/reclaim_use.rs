//! Issue 43, "reclaim by real use": the reclaimer asks a container's node what it is doing before
//! it stops it for idleness, and counts only real use. End to end on a real node (LXD and Incus),
//! PostgreSQL, ssh and JupyterLab in Chromium:
//! - an SSH session with input keeps its container, one without input does not, and a process
//!   above the CPU threshold keeps its container too;
//! - `max_runtime_minutes` stops a container that ran that long, with its reason;
//! - a JupyterLab tab left open (its own polling, relayed by the portal) keeps nothing, while a
//!   kernel executing a cell does.
//!
//! A reclaim "minute" is 10 s here (`COHORT_RECLAIM_MINUTE_S`; 25 s for JupyterLab), so
//! `idle_gpu_minutes = 3` is 30 s. The idle policy is written once the scene is set (there is no API to change it after a
//! course is made), so every container has been idle by the old measure for longer than the
//! window when the reclaimer first looks: without asking the node, it would stop them all.

use crate::cli_support::OneNode;
use crate::jupyter::jupyter_tarball;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestNetwork};
use diesel::prelude::*;
use diesel::sql_types::{Integer, Nullable, Text, Timestamptz};

/// A reclaim minute of 10 s, passes every second.
const FAST_RECLAIM: [(&str, &str); 2] = [
    ("COHORT_RECLAIM_INTERVAL_S", "1"),
    ("COHORT_RECLAIM_MINUTE_S", "10"),
];

#[derive(QueryableByName, Debug)]
struct Seen {
    #[diesel(sql_type = Text)]
    desired_state: String,
    #[diesel(sql_type = Nullable<Text>)]
    stop_reason: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    notebook_active_at: Option<chrono::DateTime<chrono::Utc>>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    tty_input_at: Option<chrono::DateTime<chrono::Utc>>,
    #[diesel(sql_type = Nullable<Text>)]
    busy_process: Option<String>,
}

/// What the controller's database says of instance `name`.
fn seen(db: &str, name: &str) -> Seen {
    let mut conn = PgConnection::establish(db).expect("database");
    diesel::sql_query(
        "SELECT i.desired_state, u.stop_reason, u.notebook_active_at, a.tty_input_at,
                a.busy_process
           FROM instances i
           LEFT JOIN instance_usage u ON u.instance_id = i.id
           LEFT JOIN instance_activity a ON a.instance_id = i.id
          WHERE i.name = $1",
    )
    .bind::<Text, _>(name)
    .get_result(&mut conn)
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Gives course `code` an idle policy: stop after `minutes` reclaim minutes without use.
fn stop_when_idle(db: &str, code: &str, minutes: i32) {
    let mut conn = PgConnection::establish(db).expect("database");
    let n = diesel::sql_query(
        "INSERT INTO course_reclaim (course_id, idle_gpu_minutes, idle_action, warn_minutes)
         SELECT id, $2, 'stop', 0 FROM courses WHERE code = $1",
    )
    .bind::<Text, _>(code)
    .bind::<Integer, _>(minutes)
    .execute(&mut conn)
    .expect("idle policy");
    assert_eq!(n, 1, "course {code}");
}

/// Waits (bounded) until `name` is wanted stopped by the reclaimer; its view then.
fn wait_stopped(node: &OneNode, name: &str, within: Duration) -> Seen {
    let db = node.controller.db_url();
    let deadline = Instant::now() + within;
    loop {
        let s = seen(db, name);
        if s.desired_state == "stopped" && s.stop_reason.is_some() {
            return s;
        }
        if Instant::now() > deadline {
            panic!(
                "{name} not stopped within {within:?}: {s:?}\n{}",
                heard_of(node, name)
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What the controller's log says the reclaimer heard of `name`, short enough to survive a CI
/// log's tail.
fn heard_of(node: &OneNode, name: &str) -> String {
    let log =
        std::fs::read_to_string(node.controller.state.path().join("serve.log")).unwrap_or_default();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(name) || l.contains("reclaim") || l.contains("activity"))
        .collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn assert_running(db: &str, name: &str, why: &str) -> Seen {
    let s = seen(db, name);
    assert_eq!(s.desired_state, "running", "{name} ({why}): {s:?}");
    assert_eq!(s.stop_reason, None, "{name} ({why})");
    s
}

pub(crate) fn roster(node: &OneNode, code: &str, students: &[(&str, &SshKey)]) {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("roster.csv");
    let mut csv = String::from("username,name,email,ssh_key\n");
    for (user, key) in students {
        csv.push_str(&format!("{user},{user},,{}\n", key.public_key()));
    }
    std::fs::write(&file, csv).expect("roster");
    node.cli
        .ok(&["course", "roster", code, file.to_str().expect("path")]);
    node.cli
        .ok(&["course", "provision", code, "--wait", "--quiet"]);
}

/// `user`'s SSH endpoint in course `code`.
pub(crate) fn endpoint(node: &OneNode, code: &str, user: &str) -> (String, u16) {
    let endpoints = node.cli.ok(&["course", "endpoints", code]);
    let row = endpoints
        .lines()
        .find(|l| l.starts_with(&format!("{user},")))
        .unwrap_or_else(|| panic!("{user}'s row in {endpoints}"));
    let f: Vec<&str> = row.split(',').collect();
    (f[3].to_string(), f[4].parse().expect("port"))
}

/// An interactive SSH session (a terminal in the container), its input ours to write.
struct Session(Child);

impl Session {
    fn open(key: &SshKey, (host, port): &(String, u16), user: &str) -> Self {
        let up = key.run_when_up(host, *port, user, "true", Duration::from_secs(60));
        assert!(up.status.success(), "{user}'s ssh: {up:?}");
        let child = Command::new("ssh")
            .args([
                "-tt",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
            ])
            .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
            .arg("-i")
            .arg(key.private_key())
            .args(["-p", &port.to_string(), &format!("{user}@{host}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh");
        Session(child)
    }

    /// Types a command, as a student does.
    fn type_line(&mut self) {
        let stdin = self.0.stdin.as_mut().expect("stdin");
        let _ = stdin.write_all(b"true\n");
        let _ = stdin.flush();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Dan's SSH session has no input and his container is stopped; Cat types in hers and Eve's
/// compiles (a process spinning a core): both keep theirs. Fay's course stops containers after
/// 4 reclaim minutes of running, idle or not.
fn terminal_and_cpu_use_keep_a_container(daemon: TestDaemon) {
    let node = OneNode::start_with_env_on(daemon, &FAST_RECLAIM);
    let db = node.controller.db_url().to_string();
    let cli = &node.cli;
    for (code, extra) in [("su1", None), ("mr1", Some("4"))] {
        let mut args = vec![
            "course",
            "create",
            code,
            "--title",
            "Use",
            "--image",
            "cohort/base",
            "--memory",
            "256MiB",
            "--disk",
            "2GiB",
        ];
        if let Some(minutes) = extra {
            args.extend(["--max-runtime-minutes", minutes, "--warn-minutes", "0"]);
        }
        cli.ok(&args);
    }
    let (cat, dan, eve, fay) = (
        SshKey::generate(),
        SshKey::generate(),
        SshKey::generate(),
        SshKey::generate(),
    );
    roster(&node, "mr1", &[("fay", &fay)]);
    roster(&node, "su1", &[("cat", &cat), ("dan", &dan), ("eve", &eve)]);

    let mut cat_session = Session::open(&cat, &endpoint(&node, "su1", "cat"), "cat");
    let _dan_session = Session::open(&dan, &endpoint(&node, "su1", "dan"), "dan");
    node.lxd.lxc(&[
        "exec",
        "su1-eve",
        "--",
        "sh",
        "-c",
        "setsid sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &",
    ]);
    let policy_set = Instant::now();
    stop_when_idle(&db, "su1", 3);

    // Dan goes once his login is 30 s old; Cat types every 3 s meanwhile.
    let deadline = Instant::now() + Duration::from_secs(75);
    let dan_seen = loop {
        cat_session.type_line();
        let s = seen(&db, "su1-dan");
        if s.stop_reason.is_some() || Instant::now() > deadline {
            break s;
        }
        std::thread::sleep(Duration::from_secs(3));
    };
    let reason = dan_seen.stop_reason.clone().unwrap_or_else(|| {
        let log = std::fs::read_to_string(node.controller.state.path().join("serve.log"))
            .unwrap_or_default();
        panic!("dan not stopped within 75 s: {dan_seen:?}\n{log}")
    });
    assert!(reason.contains("idle_gpu_minutes is 3"), "{reason}");
    eprintln!("dan stopped {:?} after the policy", policy_set.elapsed());
    // Past Dan's stop by more than a pass (and the agent's 1 s sample), Cat and Eve still run.
    for _ in 0..4 {
        cat_session.type_line();
        std::thread::sleep(Duration::from_secs(3));
    }
    let cat_seen = assert_running(&db, "su1-cat", "typing over SSH");
    assert!(cat_seen.tty_input_at.is_some(), "{cat_seen:?}");
    let eve_seen = assert_running(&db, "su1-eve", "a process spinning a core");
    assert!(
        eve_seen
            .busy_process
            .as_deref()
            .is_some_and(|p| p.starts_with("sh ")),
        "{eve_seen:?}"
    );

    // Max runtime: Fay, untouched, is stopped once she has run 4 minutes (40 s).
    let fay_seen = wait_stopped(&node, "mr1-fay", Duration::from_secs(90));
    let reason = fay_seen.stop_reason.expect("reason");
    assert!(
        reason.contains("the course's max_runtime is 4 minutes"),
        "{reason}"
    );
    let ran: u32 = reason
        .trim_start_matches("ran ")
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("minutes run in {reason}"));
    assert!(ran >= 4, "{reason}");
    drop(cat_session);
}

#[test]
fn terminal_and_cpu_use_keep_a_container_on_lxd() {
    terminal_and_cpu_use_keep_a_container(TestDaemon::Lxd);
}

#[test]
fn terminal_and_cpu_use_keep_a_container_on_incus() {
    terminal_and_cpu_use_keep_a_container(TestDaemon::Incus);
}

/// Ann has JupyterLab open in Chromium (it polls the server through the portal's relay every
/// few seconds, and the page fetches its kernels list every 2 s besides) and nothing running:
/// her container is stopped. Bob's kernel executes a long cell, no tab open: his is kept.
#[test]
fn a_polling_jupyter_tab_is_not_use_and_an_executing_kernel_is() {
    let tarball = jupyter_tarball();
    let net = TestNetwork::claim();
    // A reclaim minute of 25 s here, so the window (75 s) is longer than the old relay's
    // once-a-minute mark of use: with relay traffic counted, the open tab would keep Ann's.
    let node = OneNode::start_with_env(
        Some(&net),
        &[
            ("COHORT_RECLAIM_INTERVAL_S", "1"),
            ("COHORT_RECLAIM_MINUTE_S", "25"),
        ],
    );
    let db = node.controller.db_url().to_string();
    let cli = &node.cli;
    cli.ok(&[
        "-q",
        "image",
        "import",
        tarball.to_str().expect("path"),
        "--alias",
        "cohort/jupyter",
        "--jupyter",
    ]);
    cli.ok(&[
        "course",
        "create",
        "ju1",
        "--title",
        "Notebooks",
        "--image",
        "cohort/jupyter",
        "--memory",
        "1GiB",
        "--disk",
        "3GiB",
    ]);
    let (ann, bob) = (SshKey::generate(), SshKey::generate());
    roster(&node, "ju1", &[("ann", &ann), ("bob", &bob)]);
    set_portal_password(
        node.controller.db_url(),
        node.controller.state.path(),
        "ann",
        "ann's long password",
    );

    // Bob's kernel, started through JupyterLab's API inside his container, runs a 10-minute
    // cell (jupyter_client on the kernel's connection file, as a console would).
    let start_kernel = r#"
import json, os, socket, subprocess, time, urllib.request
from jupyter_client import BlockingKernelClient
addr = subprocess.check_output(["hostname", "-I"]).split()[0].decode()
base = "http://%s:8888/jupyter/%s/api" % (addr, socket.gethostname())
for _ in range(90):
    try:
        urllib.request.urlopen(base + "/kernels", timeout=2)
        break
    except Exception:
        time.sleep(1)
req = urllib.request.Request(base + "/kernels", data=b'{"name": "python3"}', method="POST",
    headers={"Cookie": "_xsrf=t", "X-XSRFToken": "t", "Content-Type": "application/json"})
kid = json.load(urllib.request.urlopen(req, timeout=60))["id"]
files = []
for _ in range(60):
    files = [os.path.join(d, f) for d, _, names in os.walk("/home/bob")
             for f in names if f == "kernel-%s.json" % kid]
    if files:
        break
    time.sleep(1)
c = BlockingKernelClient(connection_file=files[0])
c.load_connection_file()
# No heartbeat channel: without a kernel manager, wait_for_ready judges the kernel dead when one
# heartbeat misses its second, which a loaded machine makes happen ("Kernel died before replying
# to kernel_info" of a kernel that lives); the kernel_info reply is the proof of life waited for.
c.start_channels(hb=False)
c.wait_for_ready(timeout=180)
# JupyterLab learns a kernel's state from its iopub messages, and on a loaded machine it may
# subscribe after the kernel's first ones: a cell sent then leaves it at "starting" for the
# cell's ten minutes. Each kernel_info is a busy/idle pair there: ask until it has seen one.
for _ in range(120):
    states = [k["execution_state"]
              for k in json.load(urllib.request.urlopen(base + "/kernels", timeout=5))
              if k["id"] == kid]
    if states and states[0] != "starting":
        break
    c.kernel_info()
    time.sleep(1)
c.execute("import time; time.sleep(600)")
# A kernel starts slowly on a loaded machine: up to 3 minutes.
for _ in range(360):
    kernels = json.load(urllib.request.urlopen(base + "/kernels", timeout=5))
    if any(k["execution_state"] == "busy" for k in kernels):
        break
    time.sleep(0.5)
print(json.dumps(kernels))
"#;
    let out = node.lxd.lxc_output(&[
        "exec",
        "ju1-bob",
        "--",
        "/opt/jupyter/bin/python",
        "-c",
        start_kernel,
    ]);
    let kernels = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && kernels.contains("\"execution_state\": \"busy\""),
        "bob's kernel executing: {out:?}"
    );

    let ports = PortRange::claim();
    let base = node.controller.url.clone();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(async {
            let browser = Browser::start(ports.port(0), "en").await;
            browser.sign_in(&base, "ann", "ann's long password").await;
            browser.goto(&format!("{base}/containers/ju1-ann")).await;
            browser.follow("#open-jupyter").await;
            let notebook = base.replace("127.0.0.1", "ju1-ann.notebooks.localhost");
            assert_eq!(
                browser.url().await,
                format!("{notebook}/jupyter/ju1-ann/lab")
            );
            // Polling besides JupyterLab's own, so the relay is busy all along.
            browser
                .run(
                    "window.setInterval(() => fetch('/jupyter/ju1-ann/api/kernels'), 2000);
                     return true;",
                )
                .await;
            tokio::time::sleep(Duration::from_secs(3)).await;
            stop_when_idle(&db, "ju1", 3);
            let policy_set = Instant::now();
            let ann_seen = tokio::task::block_in_place(|| {
                wait_stopped(&node, "ju1-ann", Duration::from_secs(100))
            });
            assert!(
                ann_seen
                    .stop_reason
                    .as_deref()
                    .is_some_and(|r| r.contains("idle_gpu_minutes is 3")),
                "{ann_seen:?}"
            );
            eprintln!("ann stopped {:?} after the policy", policy_set.elapsed());
            // More than a pass after Ann's stop, Bob runs, his kernel's work recorded.
            tokio::time::sleep(Duration::from_secs(8)).await;
            let bob_seen = assert_running(&db, "ju1-bob", "a kernel executing");
            let at = bob_seen
                .notebook_active_at
                .unwrap_or_else(|| panic!("bob's notebook use: {}", heard_of(&node, "ju1-bob")));
            assert!(
                chrono::Utc::now() - at < chrono::Duration::seconds(60),
                "{bob_seen:?}"
            );
        });
}
