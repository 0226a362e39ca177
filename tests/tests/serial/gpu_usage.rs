//! Issue 43, GPU time, end to end with real processes: a controller, one LXD node and one Incus
//! node, each agent reading the test NVML library, whose utilisation a script file sets over
//! time. Bob works on an exclusive GPU at 50 % on one node; Alice holds a CUDA context at 0 %
//! on the other. The hourly accounting's allocated and busy GPU-seconds match the time that
//! passed and the scripted utilisation within a stated tolerance, on both daemons; the
//! Prometheus counters by course follow; Alice's context at 0 % is reclaimed as idle while Bob
//! keeps running; `GET /usage` and `cohort usage` answer each role with what it may see, 403
//! past that, and 400 naming the field for a bad date or grouping.
//!
//! Tolerance: polls run every second and each adds the time since the node's previous poll, so
//! a window's allocated seconds match its wall time within 15 % plus 4 s (a poll's lag at each
//! end on a loaded two-core machine); busy over allocated is the scripted 50 % within 2 points.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::observe::{build_fake_nvml, sample, start_sleep_on};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd};
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli_support::Cli;

/// `GET /usage?query` as `token`: the status and body.
async fn usage(cluster: &Cluster, token: &str, query: &str) -> (u16, Value) {
    let res = cluster
        .request(Method::GET, &format!("/usage?{query}"), token)
        .send()
        .await
        .expect("usage");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The (allocated, busy) seconds of `key` in a report's rows, (0, 0) when absent.
fn row(report: &Value, key: &str) -> (f64, f64) {
    report["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["key"] == key)
        .map_or((0.0, 0.0), |r| {
            (
                r["allocated_seconds"].as_f64().unwrap_or(0.0),
                r["busy_seconds"].as_f64().unwrap_or(0.0),
            )
        })
}

/// The LXD (or Incus) project of the cluster's node `node`.
fn lxd_of<'a>(cluster: &'a Cluster, node: &str) -> &'a TestLxd {
    &cluster
        .nodes
        .iter()
        .find(|n| n.name == node)
        .unwrap_or_else(|| panic!("node {node:?}"))
        .lxd
}

async fn observed(cluster: &Cluster, name: &str) -> Value {
    cluster
        .admin(Method::GET, &format!("/instances/{name}"), None)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gpu_time_is_accounted_on_lxd_and_incus_and_a_context_at_zero_percent_is_reclaimed() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = build_fake_nvml(dir.path());
    let (procs, gpus) = (dir.path().join("processes"), dir.path().join("gpus"));
    std::fs::write(&procs, "").expect("no processes yet");
    // GPU 1 (an L40S) at 50 %, GPU 0 (the A100) at 0 %.
    std::fs::write(&gpus, "0 0 0\n1 50 2147483648\n").expect("GPU script");
    // The agents inherit these.
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    std::env::set_var("FAKE_NVML_GPUS", &gpus);
    std::env::set_var("FAKE_NVML_ALL_MIG", "0");
    std::env::set_var("COHORT_AGENT_NVML_LIBRARY", &lib);
    // A reclaim "minute" is 10 s: the idle window is 40 s.
    let mut cluster = Cluster::start_with_env(
        0,
        &[
            ("COHORT_POLL_INTERVAL_S", "1"),
            ("COHORT_RECLAIM_INTERVAL_S", "1"),
            ("COHORT_RECLAIM_MINUTE_S", "10"),
            ("COHORT_METRICS_TOKEN", "prometheus-scrape-token"),
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
    let prof = cluster.user("prof", "instructor").await;
    let other_prof = cluster.user("prof2", "instructor").await;
    let created = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            idle_gpu_minutes: Some(4),
            warn_minutes: Some(0),
            ..course("gpu1", "GPUs", "cohort/base")
        })
        .send()
        .await
        .expect("course");
    assert_eq!(created.status(), 201);
    // Alice on the Incus node, Bob on the LXD node: the other one cordoned for each provision.
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
        cluster.import_roster(&prof, "gpu1", roster).await;
        let op = cluster.provision("gpu1", &prof).await;
        assert_eq!(op["status"], "success", "{op}");
    }

    // Each student's process on a GPU, in their node's container.
    let node_of = |v: &Value| v["node"].as_str().unwrap_or_default().to_string();
    let bob_node = node_of(&observed(&cluster, "gpu1-bob").await);
    let alice_node = node_of(&observed(&cluster, "gpu1-alice").await);
    let bob_pid = start_sleep_on(lxd_of(&cluster, &bob_node), "gpu1-bob");
    let alice_pid = start_sleep_on(lxd_of(&cluster, &alice_node), "gpu1-alice");
    // Bob alone on GPU 1 (measured by the GPU's 50 %), Alice's context at 0 % on GPU 0.
    std::fs::write(
        &procs,
        format!("1 {bob_pid} 1073741824\n0 {alice_pid} 536870912 0\n"),
    )
    .expect("processes");
    let mut on_nodes = [bob_node.clone(), alice_node.clone()];
    on_nodes.sort();
    assert_eq!(on_nodes, ["on-incus", "on-lxd"], "spread over both daemons");

    // A window of accounting for Bob: from a first row to about 25 s later.
    let admin = cluster.admin_token.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    let (first, t0) = loop {
        let (_, report) = usage(&cluster, &admin, "by=student").await;
        if row(&report, "bob").0 > 0.0 && row(&report, "alice").0 > 0.0 {
            break (report, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "no GPU time accounted: {report}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    tokio::time::sleep(Duration::from_secs(25)).await;
    let (status, second) = usage(&cluster, &admin, "by=student").await;
    let wall = t0.elapsed().as_secs_f64();
    assert_eq!(status, 200, "{second}");
    let (a0, b0) = row(&first, "bob");
    let (a1, b1) = row(&second, "bob");
    let (allocated, busy) = (a1 - a0, b1 - b0);
    assert!(
        (allocated - wall).abs() <= 0.15 * wall + 4.0,
        "bob held one GPU for {wall:.1} s, accounted {allocated:.1} s"
    );
    let share = busy / allocated;
    assert!(
        (share - 0.5).abs() <= 0.02,
        "bob's GPU at 50 %: busy share {share:.3} ({busy:.1} of {allocated:.1} s)"
    );
    // Alice held her GPU the whole time and kept it busy not at all.
    let (alice_allocated, alice_busy) = row(&second, "alice");
    assert!(alice_allocated >= 0.85 * wall - 4.0, "{second}");
    assert_eq!(alice_busy, 0.0, "{second}");

    // By node: each daemon's node accounted its student's GPU.
    let (_, by_node) = usage(&cluster, &admin, "by=node").await;
    assert!(
        row(&by_node, &bob_node).0 > 0.0 && row(&by_node, &alice_node).0 > 0.0,
        "{by_node}"
    );
    // Prometheus: the counters by course, busy below allocated.
    let metrics = cluster.scrape("prometheus-scrape-token").await;
    let counted = |name: &str| sample(&metrics, name, &[("course", "gpu1")]).unwrap_or(0.0);
    let (m_allocated, m_busy) = (
        counted("cohort_gpu_allocated_seconds_total"),
        counted("cohort_gpu_busy_seconds_total"),
    );
    assert!(m_allocated >= a1 + alice_allocated - 10.0, "{metrics}");
    assert!(
        m_busy > 0.0 && m_busy < m_allocated,
        "{m_busy} of {m_allocated}"
    );

    // Alice's context at 0 % is idle: stopped at the end of her window, with the reason; Bob at
    // 50 % keeps running.
    let deadline = Instant::now() + Duration::from_secs(90);
    let alice = loop {
        let alice = observed(&cluster, "gpu1-alice").await;
        if alice["observed_state"] == "stopped" {
            break alice;
        }
        assert!(
            Instant::now() < deadline,
            "a context held at 0 % was not reclaimed: {alice}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let reason = alice["stop_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("idle_gpu_minutes is 4"), "{reason}");
    let bob = observed(&cluster, "gpu1-bob").await;
    assert_eq!(bob["observed_state"], "running", "{bob}");

    // Roles: a student sees their own; another's is 403; the instructor sees the class; an
    // instructor of other courses is refused this one and sees nothing of it.
    let bob_token = cluster.token_for("bob").await;
    let (status, own) = usage(&cluster, &bob_token, "").await;
    assert_eq!(status, 200, "{own}");
    let own_keys: Vec<&str> = own["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter_map(|r| r["key"].as_str())
        .collect();
    assert_eq!(own_keys, ["bob"], "{own}");
    let (status, _) = usage(&cluster, &bob_token, "user=alice").await;
    assert_eq!(status, 403);
    let (status, class) = usage(&cluster, &prof, "course=gpu1&by=student").await;
    assert_eq!(status, 200);
    assert_eq!(class["rows"].as_array().map(Vec::len), Some(2), "{class}");
    let (status, _) = usage(&cluster, &other_prof, "course=gpu1").await;
    assert_eq!(status, 403);
    let (status, none) = usage(&cluster, &other_prof, "by=course").await;
    assert_eq!(
        (status, none["rows"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    // By day: today's row holds everything; a day range that excludes today holds nothing.
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let (_, by_day) = usage(
        &cluster,
        &admin,
        &format!("by=day&since={today}&until={today}"),
    )
    .await;
    assert!(row(&by_day, &today).0 >= a1, "{by_day}");
    let (_, before) = usage(&cluster, &admin, "by=day&until=2020-01-01").await;
    assert_eq!(before["rows"].as_array().map(Vec::len), Some(0), "{before}");
    // Bad input: 400 naming the field.
    for (query, field) in [
        ("by=week", "by"),
        ("since=yesterday", "since"),
        ("until=2026-13-01", "until"),
        ("since=2026-11-02&until=2026-11-01", "until"),
        ("colour=red", "colour"),
    ] {
        let (status, body) = usage(&cluster, &admin, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["field"], field, "{query}: {body}");
    }

    // The CLI: CSV for the department's report, in hours.
    let cli = Cli {
        conf: tempfile::tempdir().expect("conf dir"),
    };
    cli.ok(&[
        "remote",
        "add",
        "lab",
        &cluster.controller.url(),
        "--token",
        &admin,
        "--accept-certificate",
    ]);
    let csv = cli.ok(&[
        "usage", "lab:", "--course", "gpu1", "--by", "student", "--format", "csv",
    ]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines.len(),
        2,
        "one line a student, as lxc prints CSV (no header): {csv}"
    );
    let bob_line: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("bob,"))
        .expect("bob's row")
        .split(',')
        .collect();
    let hours: f64 = bob_line[1].parse().expect("allocated hours");
    assert!(hours > 0.0 && hours * 3600.0 >= a1 - 36.0, "{csv}");
    let out = cli.run(&["usage", "lab:", "--by", "month"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("by"),
        "{out:?}"
    );

    portal_pages(&cluster).await;
}

/// The keys (first cells) of the rows of the table `css` on the browser's page.
async fn keys(browser: &Browser, css: &str) -> Value {
    browser
        .run(&format!(
            "return [...document.querySelectorAll('{css} tbody td.key')].map(e => e.textContent)"
        ))
        .await
}

/// The portal's `/usage` in a real browser: the instructor's class table sorted by hours or by
/// name, the per-day SVG chart drawn on the server, the admin's nodes and CSV download, and the
/// student's own courses only.
async fn portal_pages(cluster: &Cluster) {
    let base = cluster.controller.url();
    let dir = cluster.controller_dir();
    cluster.user("dept", "admin").await;
    for user in ["prof", "bob", "dept"] {
        set_portal_password(&cluster.db_url, &dir, user, "gpu hours 4 all");
    }
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(&base, "prof", "gpu hours 4 all").await;
    // Sorted by hours: Alice, stopped at the end of her window, has held her GPU for less time.
    browser
        .goto(&format!("{base}/usage?course=gpu1&sort=hours"))
        .await;
    assert_eq!(
        keys(&browser, "#usage-students").await,
        json!(["bob", "alice"])
    );
    browser.follow("#sort-name").await;
    assert_eq!(
        keys(&browser, "#usage-students").await,
        json!(["alice", "bob"])
    );
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    let bar = browser
        .run(&format!(
            "const g = document.querySelector('#usage-chart svg g.day[data-day=\"{today}\"]'); \
             return g && [g.dataset.allocatedHours, g.querySelectorAll('rect').length]"
        ))
        .await;
    let hours: f64 = bar[0].as_str().unwrap_or("0").parse().unwrap_or(0.0);
    assert!(hours > 0.0 && bar[1] == 2, "today's bar: {bar}");
    assert_eq!(
        browser.count("script:not([src])").await,
        0,
        "no inline script"
    );
    assert_eq!(
        browser.count("#usage-by-node").await,
        0,
        "nodes are the admin's"
    );

    let admin = Browser::start(ports.port(1), "en").await;
    admin.sign_in(&base, "dept", "gpu hours 4 all").await;
    admin.goto(&format!("{base}/usage")).await;
    let mut nodes = keys(&admin, "#usage-by-node").await;
    nodes
        .as_array_mut()
        .expect("nodes")
        .sort_by_key(|v| v.to_string());
    assert_eq!(nodes, json!(["on-incus", "on-lxd"]));
    let csv = admin
        .run_async(
            "const done = arguments[0]; \
             fetch('/usage.csv?by=course').then(r => r.text()).then(done)",
        )
        .await;
    let csv = csv.as_str().expect("CSV text");
    assert!(
        csv.starts_with("course,allocated_hours,busy_hours"),
        "{csv}"
    );
    assert!(csv.lines().any(|l| l.starts_with("gpu1,")), "{csv}");

    let student = Browser::start(ports.port(2), "zh-TW").await;
    student.sign_in(&base, "bob", "gpu hours 4 all").await;
    student.goto(&format!("{base}/usage")).await;
    assert_eq!(student.text("h1").await, "GPU 時間");
    assert_eq!(keys(&student, "#usage-courses").await, json!(["gpu1"]));
    assert_eq!(student.count("#usage-students").await, 0);
}
