//! Issue 9, the controller, end to end with real processes: the reclaimer stops a container
//! whose GPU stayed idle past its course's `idle_gpu_minutes` and leaves a busy one alone (busy
//! on the GPU, or in JupyterLab through the portal, issue 28), stops
//! an ended course's containers and deletes them after the grace period, each with its reason in
//! the instance view and the audit log (admin and instructor may read it, a student may not);
//! `/metrics` of the controller and of the agent's loopback listener pass `promtool check
//! metrics`, and every metric the Grafana dashboard queries is one of theirs.
//!
//! No GPU can be attached here (LXD cannot start a container with `nvidia.runtime` or a `gpu`
//! device without a GPU), so the containers are ordinary ones and GPU use comes from the test
//! NVML library, which reports a compute process whose PID is a real `sleep` inside the busy
//! container; the agent maps it to the container through its cgroup like it would a CUDA job.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::observe::{build_fake_nvml, promtool_check, sample_names, start_sleep_in};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::PortRange;
use reqwest::Method;
use serde_json::{json, Value};

async fn create_course(cluster: &Cluster, token: &str, body: Value) {
    let res = cluster
        .request(Method::POST, "/courses", token)
        .json(&body)
        .send()
        .await
        .expect("create course");
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
}

/// Writes `notebook_active_at` of `instance` every 3 s, as the reclaimer does when JupyterLab
/// reports a kernel executing (tests/tests/it/reclaim_use.rs shows it), until dropped (at most
/// 5 minutes).
struct NotebookUse {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl NotebookUse {
    fn start(db_url: &str, instance: &str) -> Self {
        use diesel::prelude::*;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (url, name, flag) = (db_url.to_string(), instance.to_string(), stop.clone());
        let writer = std::thread::spawn(move || {
            let mut conn = PgConnection::establish(&url).expect("database");
            for _ in 0..100 {
                if flag.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                diesel::sql_query(
                    "UPDATE instance_usage SET notebook_active_at = now() \
                     WHERE instance_id = (SELECT id FROM instances WHERE name = $1)",
                )
                .bind::<diesel::sql_types::Text, _>(&name)
                .execute(&mut conn)
                .expect("record notebook use");
                std::thread::sleep(Duration::from_secs(3));
            }
        });
        NotebookUse {
            stop,
            writer: Some(writer),
        }
    }
}

impl Drop for NotebookUse {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

async fn enroll_and_provision(cluster: &Cluster, token: &str, code: &str, students: &[&str]) {
    let mut roster = String::from("username,name,email,ssh_key\n");
    for s in students {
        let key = SshKey::generate();
        roster.push_str(&format!("{s},{s},{s}@uni.edu,{}\n", key.public_key()));
    }
    let res = cluster
        .request(Method::POST, &format!("/courses/{code}/roster"), token)
        .header("content-type", "text/csv")
        .body(roster)
        .send()
        .await
        .expect("roster");
    assert!(
        res.status().is_success(),
        "{}",
        res.text().await.unwrap_or_default()
    );
    let id = cluster.start_provision(code, token).await;
    let done = cluster.wait_operation(&id, Duration::from_secs(600)).await;
    assert_eq!(done["status"], "success", "{done}");
}

async fn instance(cluster: &Cluster, name: &str) -> Option<Value> {
    let res = cluster
        .request(
            Method::GET,
            &format!("/instances/{name}"),
            &cluster.admin_token,
        )
        .send()
        .await
        .expect("instance");
    if res.status() == 404 {
        return None;
    }
    Some(res.json().await.expect("instance json"))
}

/// Polls until `check` holds for the instance view (or its absence), or panics.
async fn wait_for(
    cluster: &Cluster,
    name: &str,
    within: Duration,
    what: &str,
    check: impl Fn(&Option<Value>) -> bool,
) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let seen = instance(cluster, name).await;
        if check(&seen) {
            return seen;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: not {what} within {within:?}: {seen:?}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_and_ended_containers_are_reclaimed_with_their_reason() {
    let _alone = crate::alone().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = build_fake_nvml(dir.path());
    let procs = dir.path().join("processes");
    std::fs::write(&procs, "").expect("no processes yet");
    let metrics_port = PortRange::claim();
    // The agents inherit these (COHORT_AGENT_* are config overrides).
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    std::env::set_var("COHORT_AGENT_NVML_LIBRARY", &lib);
    std::env::set_var(
        "COHORT_AGENT_METRICS_LISTEN",
        format!("127.0.0.1:{}", metrics_port.first()),
    );
    // A reclaim "minute" is 15 s: the idle window below is 45 s; the end grace is 20 s.
    let cluster = Cluster::start_with_env(
        1,
        &[
            ("COHORT_RECLAIM_INTERVAL_S", "1"),
            ("COHORT_RECLAIM_MINUTE_S", "15"),
            ("COHORT_DELETE_AFTER_END_S", "20"),
            ("COHORT_METRICS_TOKEN", "prometheus-scrape-token"),
        ],
    )
    .await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    let project = cluster.nodes[0].lxd.project().to_string();

    // A GPU course with a 3-minute (45 s) idle window: alice works on the GPU, bob does not.
    create_course(
        &cluster,
        &prof,
        to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            idle_gpu_minutes: Some(3),
            warn_minutes: Some(0),
            ..course("gpu1", "GPUs", "cohort/base")
        }),
    )
    .await;
    let bad = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&json!({"code": "gpu2", "title": "x", "image": "cohort/base", "idle_gpu_minutes": 0}))
        .send()
        .await
        .expect("answer");
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("error");
    assert_eq!(bad["error"]["field"], "idle_gpu_minutes");

    enroll_and_provision(&cluster, &prof, "gpu1", &["alice"]).await;
    let alice_pid = start_sleep_in(&project, "gpu1-alice");
    std::fs::write(&procs, format!("1 {alice_pid} 1073741824\n")).expect("alice on GPU 1");
    // Bob does nothing; Dan works in JupyterLab, which the reclaimer records as
    // `notebook_active_at` (tests/tests/it/reclaim_use.rs), every 3 s here.
    enroll_and_provision(&cluster, &prof, "gpu1", &["bob", "dan"]).await;
    let notebook = NotebookUse::start(&cluster.db_url, "gpu1-dan");

    // A course that ends in 40 s.
    let ends = (chrono::Utc::now() + chrono::Duration::seconds(40)).to_rfc3339();
    create_course(
        &cluster,
        &prof,
        to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ends: Some(ends.clone()),
            ..course("old1", "Ending", "cohort/base")
        }),
    )
    .await;
    enroll_and_provision(&cluster, &prof, "old1", &["carol"]).await;

    // Alice's GPU use reaches her instance view.
    let alice = wait_for(
        &cluster,
        "gpu1-alice",
        Duration::from_secs(20),
        "using a GPU",
        |i| {
            i.as_ref()
                .is_some_and(|i| i["gpu_usage"].as_array().is_some_and(|u| !u.is_empty()))
        },
    )
    .await
    .expect("alice");
    assert_eq!(alice["gpu_usage"][0]["processes"], 1, "{alice}");
    assert_eq!(alice["gpu_usage"][0]["memory_used_bytes"], 1073741824u64);

    // Bob is stopped for idleness and Dan is not, while old1 ends: Carol's stopped state lasts only
    // the 20 s grace, so it is watched for beside Bob's and Dan's checks, not after them.
    let ((bob, bob_token), carol) = tokio::join!(
        async {
            // Bob is stopped for idleness, with the reason.
            let bob = wait_for(
                &cluster,
                "gpu1-bob",
                Duration::from_secs(120),
                "stopped",
                |i| i.as_ref().is_some_and(|i| i["observed_state"] == "stopped"),
            )
            .await
            .expect("bob");
            let reason = bob["stop_reason"].as_str().expect("a stop reason");
            assert!(reason.contains("idle_gpu_minutes is 3"), "{reason}");
            assert_eq!(bob["desired_state"], "stopped");
            // The student sees it too.
            let bob_token = cluster.token_for("bob").await;
            let mine: Value = cluster
                .request(Method::GET, "/instances/gpu1-bob", &bob_token)
                .send()
                .await
                .expect("bob's view")
                .json()
                .await
                .expect("json");
            assert_eq!(mine["stop_reason"], bob["stop_reason"]);
            // Alice has been running longer than the window and is left alone.
            let alice = instance(&cluster, "gpu1-alice").await.expect("alice");
            assert_eq!(alice["observed_state"], "running", "{alice}");
            assert_eq!(alice["stop_reason"], Value::Null);
            // Dan started with Bob and has no GPU use either; past Bob's stop by more than the reclaimer
            // needs, his notebook use keeps him running.
            tokio::time::sleep(Duration::from_secs(20)).await;
            let dan = instance(&cluster, "gpu1-dan").await.expect("dan");
            assert_eq!(dan["observed_state"], "running", "{dan}");
            assert_eq!(dan["stop_reason"], Value::Null, "{dan}");
            drop(notebook);
            (bob, bob_token)
        },
        wait_for(
            &cluster,
            "old1-carol",
            Duration::from_secs(240),
            "stopped",
            |i| i.as_ref().is_some_and(|i| i["stop_reason"].is_string()),
        ),
    );
    let carol = carol.expect("carol");
    // The ended course: stopped with the reason, then deleted after the grace period.
    assert!(
        carol["stop_reason"]
            .as_str()
            .is_some_and(|r| r.contains("course old1 ended")),
        "{carol}"
    );
    let course: Value = cluster.admin(Method::GET, "/courses/old1", None).await;
    assert_eq!(course["state"], "ended");
    wait_for(
        &cluster,
        "old1-carol",
        Duration::from_secs(90),
        "deleted",
        Option::is_none,
    )
    .await;
    assert!(!cluster.nodes[0]
        .lxd
        .instance_names()
        .contains(&"old1-carol".to_string()));

    // The audit log: the reclaimer's actions with reasons; the instructor sees their courses;
    // a student is refused; pages chain.
    let page = cluster
        .admin(Method::GET, "/audit?actor=reclaim&object=gpu1-bob", None)
        .await;
    let entry = &page["entries"][0];
    assert_eq!(entry["action"], "stop", "{page}");
    assert_eq!(entry["detail"]["reason"], bob["stop_reason"]);
    let theirs: Value = cluster
        .request(Method::GET, "/audit?limit=1000", &prof)
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("json");
    let objects: BTreeSet<&str> = theirs["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["object"].as_str().unwrap_or_default())
        .collect();
    assert!(
        objects.contains("old1-carol") && objects.contains("gpu1"),
        "{objects:?}"
    );
    assert!(
        !objects.contains("node1") && !objects.contains("prof"),
        "{objects:?}"
    );
    let denied = cluster
        .request(Method::GET, "/audit", &bob_token)
        .send()
        .await
        .expect("answer");
    assert_eq!(denied.status(), 403);
    let first = cluster.admin(Method::GET, "/audit?limit=2", None).await;
    assert_eq!(first["entries"].as_array().map(Vec::len), Some(2));
    let before = first["next_before"].as_i64().expect("a next page");
    let second = cluster
        .admin(
            Method::GET,
            &format!("/audit?limit=2&before={before}"),
            None,
        )
        .await;
    assert!(second["entries"][0]["id"].as_i64().expect("id") < before);
    let bad = cluster
        .request(Method::GET, "/audit?limit=0", &cluster.admin_token)
        .send()
        .await
        .expect("answer");
    assert_eq!(bad.status(), 400);

    // Metrics: both real outputs pass promtool; the dashboard only queries what they export.
    let controller = cluster.scrape("prometheus-scrape-token").await;
    promtool_check("the controller's /metrics", &controller);
    assert!(
        controller.contains("route=\"/api/v1/instances/{name}\""),
        "latency by matched route: {controller}"
    );
    assert!(controller.contains("cohort_controller_course_gpu_processes{course=\"gpu1\"} 1"));
    let agent = reqwest::get(format!("http://127.0.0.1:{}/metrics", metrics_port.first()))
        .await
        .expect("agent metrics")
        .text()
        .await
        .expect("text");
    promtool_check("the agent's loopback /metrics", &agent);
    let mut exported = sample_names(&controller);
    exported.extend(sample_names(&agent));
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/grafana/cohort.json"
        ))
        .expect("dashboard"),
    )
    .expect("dashboard JSON");
    let mut queried = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.starts_with("cohort_") {
                    queried.insert(word.to_string());
                }
            }
        }
    }
    assert!(queried.len() >= 15, "{queried:?}");
    let missing: Vec<_> = queried.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "the dashboard queries metrics nobody exports: {missing:?}"
    );
}
