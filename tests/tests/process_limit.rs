//! Issue 24: every container gets `limits.processes` (its course's `processes`, or the
//! controller's default), its student cannot raise or remove it, and a fork bomb in one
//! student's container stays there: its forks fail at the limit while a classmate's container
//! and the controller keep answering. (Without the limit the test stops before the bomb.)

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cohort_e2e::cluster::Cluster;
use cohort_e2e::TestLxd;
use reqwest::Method;
use serde_json::{json, Value};

const LIMIT: u32 = 200;

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
    let course = |processes: u32| {
        json!({"code": "pl", "title": "Limits", "image": "cohort/base", "memory_mib": 256,
               "disk_gib": 2, "processes": processes})
    };
    let res = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&course(10))
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.expect("error");
    assert_eq!(err["error"]["field"], "processes");
    let res = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&course(LIMIT))
        .send()
        .await
        .expect("create");
    assert_eq!(res.status(), 201);
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
