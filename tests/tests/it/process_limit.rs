//! Issue 24: what a course bounds in each student's container, checked on one class (two
//! students on one node) to spare a second. Every container gets `limits.processes` (its
//! course's `processes`, or the controller's default), its student cannot raise or remove it,
//! and a fork bomb in one student's container stays there: its forks fail at the limit while a
//! classmate's container and the controller keep answering. (Without the limit the test stops
//! before the bomb.) The course sets the size of its students' homes, and a student who fills
//! their home meets ENOSPC (btrfs answers EDQUOT, "Disk quota exceeded", at the volume's qgroup
//! limit) in their own container only: a classmate on the same pool keeps writing. The node's
//! pool use, as its agent reads it from LXD, reaches `/metrics`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cohort_e2e::cluster::Cluster;
use cohort_e2e::TestLxd;
use reqwest::Method;
use serde_json::{json, Value};

const LIMIT: u32 = 200;

/// The home size: small, so filling it is quick.
const HOME_MIB: u64 = 64;

fn processes(lxd: &TestLxd, name: &str) -> u64 {
    lxd.lxc(&["list", "-f", "csv", "-c", "nN"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name},")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Force-stops the bombed container whatever happens to the test.
struct Defuse<'a>(&'a TestLxd, &'a str, Option<std::process::Child>);

impl Drop for Defuse<'_> {
    fn drop(&mut self) {
        let _ = self.0.lxc_output(&["stop", "--force", self.1]);
        if let Some(mut child) = self.2.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fork_bomb_stays_inside_its_container() {
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    let course = |processes: u32, home_mib: u64| {
        json!({"code": "pl", "title": "Limits", "image": "cohort/base", "memory_mib": 256,
               "disk_gib": 2, "processes": processes, "home_mib": home_mib})
    };
    for (body, field) in [
        (course(10, HOME_MIB), "processes"),
        (course(LIMIT, 16), "home_mib"),
    ] {
        let res = cluster
            .request(Method::POST, "/courses", &prof)
            .json(&body)
            .send()
            .await
            .expect("answer");
        assert_eq!(res.status(), 400);
        let err: Value = res.json().await.expect("error");
        assert_eq!(err["error"]["field"], field, "{err}");
    }
    let res = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&course(LIMIT, HOME_MIB))
        .send()
        .await
        .expect("create");
    assert_eq!(res.status(), 201);
    let made: Value = res.json().await.expect("course");
    assert_eq!(made["home_mib"], HOME_MIB);
    let res = cluster
        .request(Method::POST, "/courses/pl/roster", &prof)
        .header("content-type", "text/csv")
        .body("username,name,email,ssh_key\ns1,S1,,\ns2,S2,,\n")
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 200);
    let id = cluster.start_provision("pl", &prof).await;
    let done = cluster.wait_operation(&id, Duration::from_secs(600)).await;
    assert_eq!(done["status"], "success", "{done}");
    let lxd = &cluster.nodes[0].lxd;
    for name in ["pl-s1", "pl-s2"] {
        let got = lxd.lxc(&["config", "get", name, "limits.processes"]);
        assert_eq!(got.trim(), LIMIT.to_string(), "{name}");
    }

    a_full_home_stops_only_its_own_student(&cluster).await;

    // Its student may lower the limit, not raise or remove it.
    let s1 = cluster.token_for("s1").await;
    for (body, field) in [
        (
            json!({"config": {"limits.processes": "100000"}}),
            "config.limits.processes",
        ),
        (
            json!({"unset": ["limits.processes"]}),
            "unset.limits.processes",
        ),
    ] {
        let res = cluster
            .request(Method::PATCH, "/instances/pl-s1", &s1)
            .json(&body)
            .send()
            .await
            .expect("answer");
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.expect("error");
        assert_eq!(err["error"]["field"], field);
    }

    // The bomb (the container is force-stopped at the end, whatever happens).
    let log = tempfile::NamedTempFile::new().expect("bomb log");
    let bomb = Command::new("lxc")
        .args(["--project", lxd.project(), "exec", "pl-s1", "--"])
        .args(["sh", "-c", "b() { b | b & }; b; sleep 30"])
        .env("LXD_DIR", cohort_e2e::lxd::lxd_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen().expect("log fd"))
        .spawn()
        .expect("start the bomb");
    let _defuse = Defuse(lxd, "pl-s1", Some(bomb));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut most = 0;
    while Instant::now() < deadline {
        most = most.max(processes(lxd, "pl-s1"));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // dash says "Cannot fork" when fork(2) fails with EAGAIN: the pids cgroup's limit was
    // reached. (LXD's process count, sampled, sees the bomb's short-lived shells only now and
    // then, and never past the limit.)
    let said = std::fs::read_to_string(log.path()).unwrap_or_default();
    assert!(
        said.contains("Cannot fork"),
        "the bomb never hit the limit (at most {most} processes seen): {}",
        said.chars().take(2000).collect::<String>()
    );
    assert!(
        most <= u64::from(LIMIT),
        "{most} processes in a container limited to {LIMIT}"
    );
    // The classmate's container and the controller still answer, promptly.
    let started = Instant::now();
    let out = lxd.lxc_output(&["exec", "pl-s2", "--", "true"]);
    assert!(out.status.success(), "{out:?}");
    let inst = cluster.admin(Method::GET, "/instances/pl-s2", None).await;
    assert_eq!(inst["observed_state"], "running");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the classmate waited {:?}",
        started.elapsed()
    );
}

/// Whether `stderr` of a write says the filesystem refused it for room.
fn out_of_room(stderr: &str) -> bool {
    stderr.contains("Disk quota exceeded") || stderr.contains("No space left")
}

/// Course `pl`'s homes (students s1 and s2) have its size; s1 fills theirs, s2 keeps writing.
async fn a_full_home_stops_only_its_own_student(cluster: &Cluster) {
    let lxd = &cluster.nodes[0].lxd;
    for student in ["s1", "s2"] {
        let volume = format!("home-pl-{student}");
        let size = lxd.lxc(&["storage", "volume", "get", "cohort", &volume, "size"]);
        assert_eq!(size.trim(), format!("{HOME_MIB}MiB"), "{volume}");
    }
    let fill = |name: &str, user: &str, file: &str, mib: u64| {
        let of = format!("of=/home/{user}/{file}");
        let count = format!("count={mib}");
        let args = [
            "exec",
            name,
            "--",
            "dd",
            "if=/dev/zero",
            &of,
            "bs=1M",
            &count,
        ];
        let out = lxd.lxc_output(&[&args[..], &["conv=fsync"]].concat());
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // s1 fills their home: the write stops at the limit, and so does the next one.
    let (wrote, said) = fill("pl-s1", "s1", "fill", 2 * HOME_MIB);
    assert!(
        !wrote && out_of_room(&said),
        "s1 wrote twice their home: {said}"
    );
    let (wrote, said) = fill("pl-s1", "s1", "more", 4);
    assert!(!wrote && out_of_room(&said), "{said}");
    // s2, on the same node and pool, writes half their home.
    let (wrote, said) = fill("pl-s2", "s2", "work", HOME_MIB / 2);
    assert!(wrote, "the classmate could not write: {said}");

    // The node's pool as LXD counts it reaches the metrics (its agent reports it every poll).
    let pool: Value = serde_json::from_str(&cohort_e2e::lxd::lxc(&[
        "query",
        "/1.0/storage-pools/cohort/resources",
    ]))
    .expect("pool resources");
    let total = pool["space"]["total"].as_u64().expect("pool total");
    let scraped = cluster.scrape(&cluster.admin_token).await;
    let series = |kind: &str| {
        let prefix =
            format!("cohort_controller_node_pool_bytes{{node=\"node1\",kind=\"{kind}\"}} ");
        scraped
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    assert_eq!(series("total"), Some(total), "{scraped}");
    let used = series("used").expect("pool used in the metrics");
    assert!(used > 0 && used < total, "used {used} of {total}");
}
