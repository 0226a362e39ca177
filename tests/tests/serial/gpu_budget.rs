//! Issue 43, GPU budgets, end to end: a controller, one LXD node and one Incus node, each agent
//! reading the test NVML library, real PostgreSQL and real ssh. A course gives each student
//! 0.01 GPU hours a week (36 s of a GPU held). Alice (Incus) and Bob (LXD) each run a process on
//! a GPU while an interactive ssh session (`ssh -tt`) sits in their container: at 80 % the
//! warning arrives in that session's output once, at 100 % the GPU is detached with the reason
//! on the instance, in `cohort info` and in the audit log, and the container keeps running. The
//! instructor's grant (`cohort course grant`) lifts Bob's; another instructor's is refused.
//! Bad budgets and grants are 4xx naming the field.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cohort_e2e::bodies::to_json;
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::observe::{build_fake_nvml, start_sleep_on};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd};
use cohort_proto::api::courses::{GpuHours, GrantHours};
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli_support::Cli;

/// A request as `token`: its status and body.
async fn call(
    cluster: &Cluster,
    method: Method,
    path: &str,
    token: &str,
    body: Value,
) -> (u16, Value) {
    let res = cluster
        .request(method, path, token)
        .json(&body)
        .send()
        .await
        .expect("request");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn observed(cluster: &Cluster, name: &str) -> Value {
    cluster
        .admin(Method::GET, &format!("/instances/{name}"), None)
        .await
}

/// An interactive ssh session running `sleep`, whose terminal output is collected.
struct Terminal {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Terminal {
    fn open(key: &SshKey, port: u16, user: &str) -> Self {
        let up = key.run_when_up("127.0.0.1", port, user, "true", Duration::from_secs(90));
        assert!(up.status.success(), "{user}'s ssh: {up:?}");
        let mut child = Command::new("ssh")
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
            .args([
                "-p",
                &port.to_string(),
                &format!("{user}@127.0.0.1"),
                "sleep 300",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh");
        let output = Arc::new(Mutex::new(String::new()));
        let mut out = child.stdout.take().expect("stdout");
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("output")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal { child, output }
    }

    fn text(&self) -> String {
        self.output.lock().expect("output").clone()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (bounded) until `done` holds of what `probe` returns; that value.
async fn wait_for<F, Fut>(
    what: &str,
    within: Duration,
    cluster: &Cluster,
    probe: F,
    done: impl Fn(&Value) -> bool,
) -> Value
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = Instant::now() + within;
    loop {
        let v = probe().await;
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what} not within {within:?}: {v}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gpu_budget_warns_at_80_percent_detaches_at_100_and_a_grant_lifts_it() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = build_fake_nvml(dir.path());
    let (procs, gpus) = (dir.path().join("processes"), dir.path().join("gpus"));
    std::fs::write(&procs, "").expect("no processes yet");
    std::fs::write(&gpus, "0 30 0\n1 50 0\n").expect("GPU script");
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    std::env::set_var("FAKE_NVML_GPUS", &gpus);
    std::env::set_var("FAKE_NVML_ALL_MIG", "0");
    std::env::set_var("COHORT_AGENT_NVML_LIBRARY", &lib);
    let mut cluster = Cluster::start_with_env(
        0,
        &[
            ("COHORT_POLL_INTERVAL_S", "1"),
            ("COHORT_RECLAIM_INTERVAL_S", "1"),
        ],
    )
    .await;
    cluster
        .add_node_in("on-lxd", TestLxd::on(TestDaemon::Lxd))
        .await;
    cluster
        .add_node_in("on-incus", TestLxd::on(TestDaemon::Incus))
        .await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof-b", "instructor").await;
    let other_prof = cluster.user("prof-o", "instructor").await;

    // Bad budgets: 400 naming the field, and no course made.
    let course = json!({"code": "bud1", "title": "Budgets", "image": "cohort/base", "cpu": 1,
                        "memory_mib": 256, "disk_gib": 2});
    for (extra, field) in [
        (
            json!({"gpu_hours_per_student": -1}),
            "gpu_hours_per_student",
        ),
        (json!({"gpu_hours_per_student": 0}), "gpu_hours_per_student"),
        (
            json!({"gpu_hours_per_student": 1e7}),
            "gpu_hours_per_student",
        ),
        (
            json!({"gpu_hours_per_student": 2, "budget_period": "year"}),
            "budget_period",
        ),
        (json!({"budget_period": "week"}), "budget_period"),
    ] {
        let mut body = course.clone();
        body.as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        let (status, answer) = call(&cluster, Method::POST, "/courses", &prof, body).await;
        assert_eq!(status, 400, "{extra}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{extra}: {answer}");
    }
    let mut body = course.clone();
    body["gpu_hours_per_student"] = json!(0.01);
    body["budget_period"] = json!("week");
    let (status, made) = call(&cluster, Method::POST, "/courses", &prof, body).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (&made["gpu_hours_per_student"], &made["budget_period"]),
        (&json!(0.01), &json!("week")),
        "{made}"
    );
    let (status, answer) = call(
        &cluster,
        Method::PUT,
        "/courses/bud1/budget",
        &prof,
        json!({"gpu_hours_per_student": 20000}),
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("gpu_hours_per_student")),
        "{answer}"
    );

    // Alice on the Incus node, Bob on the LXD node.
    let mut keys = Vec::new();
    for (student, on, away) in [
        ("alice", "on-incus", "on-lxd"),
        ("bob", "on-lxd", "on-incus"),
    ] {
        cluster
            .admin(Method::POST, &format!("/nodes/{away}/cordon"), None)
            .await;
        let restored = cluster
            .admin(Method::POST, &format!("/nodes/{on}/restore"), None)
            .await;
        if let Some(id) = restored["id"].as_str() {
            cluster.wait_operation(id, Duration::from_secs(60)).await;
        }
        let key = SshKey::generate();
        let roster = format!(
            "username,name,email,ssh_key\n{student},{student},{student}@uni.edu,{}\n",
            key.public_key()
        );
        cluster.import_roster(&prof, "bud1", roster).await;
        let op = cluster.provision("bud1", &prof).await;
        assert_eq!(op["status"], "success", "{op}");
        keys.push((student, key, on));
    }
    let (_, class) = call(
        &cluster,
        Method::GET,
        "/courses/bud1/students",
        &prof,
        Value::Null,
    )
    .await;
    let port_of = |user: &str| {
        class
            .as_array()
            .expect("students")
            .iter()
            .find(|s| s["username"] == user)
            .and_then(|s| s["ssh_port"].as_u64())
            .unwrap_or_else(|| panic!("{user}'s port: {class}")) as u16
    };
    // Each student's terminal open, then a process of theirs on a GPU: the budget runs from now.
    let terminals: Vec<(&str, Terminal)> = keys
        .iter()
        .map(|(student, key, _)| (*student, Terminal::open(key, port_of(student), student)))
        .collect();
    let lxd_of = |node: &str| {
        &cluster
            .nodes
            .iter()
            .find(|n| n.name == node)
            .unwrap_or_else(|| panic!("node {node}"))
            .lxd
    };
    let alice_pid = start_sleep_on(lxd_of("on-incus"), "bud1-alice");
    let bob_pid = start_sleep_on(lxd_of("on-lxd"), "bud1-bob");
    std::fs::write(
        &procs,
        format!("0 {alice_pid} 536870912 0\n1 {bob_pid} 1073741824\n"),
    )
    .expect("processes");
    let started = Instant::now();

    // 80 % (28.8 s held): the warning in each terminal.
    let warning = "GPU hours this week. At 0.01 hours the GPU is detached";
    let deadline = Instant::now() + Duration::from_secs(90);
    while !terminals.iter().all(|(_, t)| t.text().contains(warning)) {
        assert!(
            Instant::now() < deadline,
            "no warning in the terminals: {:?}\n{}",
            terminals
                .iter()
                .map(|(s, t)| (s, t.text()))
                .collect::<Vec<_>>(),
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let warned_after = started.elapsed();
    assert!(
        warned_after >= Duration::from_secs(25),
        "warned after {warned_after:?}, before 80 % of 36 s could be held"
    );

    // 100 %: detached, running, the reason on the instance; the warning was told once.
    for name in ["bud1-alice", "bud1-bob"] {
        let seen = wait_for(
            &format!("{name}'s GPU detached"),
            Duration::from_secs(60),
            &cluster,
            || observed(&cluster, name),
            |v| v["gpu_detach_reason"].as_str().is_some(),
        )
        .await;
        let reason = seen["gpu_detach_reason"].as_str().unwrap_or_default();
        assert!(
            reason.starts_with("GPU budget used up")
                && reason.contains("of 0.01 GPU hours this week"),
            "{reason}"
        );
        assert_eq!(seen["observed_state"], "running", "{seen}");
        assert_eq!(seen["desired_state"], "running", "{seen}");
    }
    for (student, t) in &terminals {
        let told = wait_for_text(t, "is used up", Duration::from_secs(30)).await;
        assert_eq!(
            told.matches(warning).count(),
            1,
            "{student} told once: {told}"
        );
    }
    // The processes are gone with the GPU.
    std::fs::write(&procs, "").expect("no processes");

    // The audit log: the warning and the detach, as the reclaimer.
    let audit = cluster
        .admin(Method::GET, "/audit?actor=reclaim&object=bud1-bob", None)
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"budget_warning"), "{audit}");
    assert!(actions.contains(&"detach_gpus"), "{audit}");

    // The CLI: the budget in `course show`, the reason in `cohort info`.
    let cli = Cli {
        conf: tempfile::tempdir().expect("conf dir"),
    };
    cli.ok(&[
        "remote",
        "add",
        "lab",
        &cluster.controller.url(),
        "--token",
        &prof,
        "--accept-certificate",
    ]);
    let shown = cli.ok(&["course", "show", "lab:bud1"]);
    assert!(shown.contains("gpu_hours_per_student: 0.01"), "{shown}");
    assert!(shown.contains("budget_period: week"), "{shown}");
    let info = cli.ok(&["info", "lab:bud1-alice"]);
    assert!(info.contains("GPUs Detached: GPU budget used up"), "{info}");

    // Alice reads her own budget (API and `cohort gpu budget`); her instructor, enrolled in
    // nothing, has none.
    let alice = cluster.token_for("alice").await;
    let (status, mine) = call(
        &cluster,
        Method::GET,
        "/me/gpu-budgets",
        &alice,
        Value::Null,
    )
    .await;
    assert_eq!(status, 200, "{mine}");
    let mine = mine.as_array().expect("a list").clone();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(
        (
            &mine[0]["course"],
            &mine[0]["username"],
            &mine[0]["budget_hours"]
        ),
        (&json!("bud1"), &json!("alice"), &json!(0.01)),
        "{mine:?}"
    );
    assert!(
        mine[0]["used_hours"].as_f64().expect("used") >= 0.01,
        "{mine:?}"
    );
    let (_, none) = call(&cluster, Method::GET, "/me/gpu-budgets", &prof, Value::Null).await;
    assert_eq!(none, json!([]));
    cli.ok(&[
        "remote",
        "add",
        "alice",
        &cluster.controller.url(),
        "--token",
        &alice,
        "--accept-certificate",
    ]);
    let table = cli.ok(&["gpu", "budget", "alice:"]);
    let row = table
        .lines()
        .find(|l| l.contains("bud1"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(row.contains("week") && row.contains("0.01"), "{table}");

    // Alice's page in the portal: the banner and the reason.
    let base = cluster.controller.url();
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "alice",
        "gpu budget 4 all",
    );
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(&base, "alice", "gpu budget 4 all").await;
    browser.goto(&format!("{base}/containers/bud1-alice")).await;
    let banner = browser.text("#budget-used-up").await;
    assert!(
        banner.contains("GPU hours are used up") && banner.contains("/ 0.01"),
        "{banner}"
    );
    let reason = browser.text("#gpu-detach-reason").await;
    assert!(reason.starts_with("GPU budget used up"), "{reason}");
    // A budget used up offers no Attach a GPU again (a grant lifts it).
    let offered = browser
        .run("return document.querySelector('#attach-gpu-again') !== null;")
        .await;
    assert_eq!(offered, serde_json::json!(false));

    // Grants: another course's instructor is refused; bad hours and a stranger are 400s naming
    // the field; the instructor's grant lifts Bob's detach, not Alice's.
    let (status, _) = call(
        &cluster,
        Method::POST,
        "/courses/bud1/grants",
        &other_prof,
        to_json(&GrantHours {
            username: "bob".into(),
            hours: GpuHours(1.0),
        }),
    )
    .await;
    assert_eq!(status, 403);
    for (body, field) in [
        (json!({"username": "bob", "hours": -1}), "hours"),
        (json!({"username": "bob", "hours": 1e6}), "hours"),
        (json!({"username": "prof-o", "hours": 1}), "username"),
    ] {
        let (status, answer) = call(
            &cluster,
            Method::POST,
            "/courses/bud1/grants",
            &prof,
            body.clone(),
        )
        .await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{body}: {answer}"
        );
    }
    let out = cli.run(&["course", "grant", "lab:bud1", "bob", "-2"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("hours"),
        "{out:?}"
    );
    let granted = cli.ok(&["course", "grant", "lab:bud1", "bob", "0.05"]);
    assert!(granted.contains("granted_hours: 0.05"), "{granted}");
    let bob = observed(&cluster, "bud1-bob").await;
    assert_eq!(
        bob["gpu_detach_reason"],
        Value::Null,
        "the grant lifts it: {bob}"
    );
    let alice = observed(&cluster, "bud1-alice").await;
    assert!(alice["gpu_detach_reason"].as_str().is_some(), "{alice}");
    let audit = cluster
        .admin(Method::GET, "/audit?actor=prof-b&object=bob", None)
        .await;
    assert!(
        audit["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .any(|e| e["action"] == "grant_gpu_hours" && e["detail"]["hours"] == json!(0.05)),
        "{audit}"
    );
}

/// Waits (bounded) until the terminal's output holds `text`; the output then.
async fn wait_for_text(t: &Terminal, text: &str, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        let out = t.text();
        if out.contains(text) {
            return out;
        }
        assert!(Instant::now() < deadline, "{text:?} not in {out}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
