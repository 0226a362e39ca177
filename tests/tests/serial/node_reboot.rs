//! Issue 24: a stop survives the node's reboot. The LXD daemon is shut down as a host shutdown
//! does (every container stopped, LXD's `lxd shutdown`) and started again: the container Cohort
//! stopped stays stopped, the running one comes back and its student logs in. This test stops
//! every container on the daemon, so it is in the serial binary: no other test runs beside it
//! (cargo runs test binaries one at a time, and this binary's tests one at a time).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::lxd_dir;
use cohort_e2e::ssh::SshKey;
use reqwest::Method;
use serde_json::{json, Value};

/// What a reboot does to LXD: every instance shut down, then the daemon started again, which
/// starts the instances `boot.autostart` asks for.
fn reboot_lxd() {
    let status = Command::new("timeout")
        .args(["300", "lxd", "shutdown"])
        .env("LXD_DIR", lxd_dir())
        .status()
        .expect("run lxd shutdown");
    assert!(status.success(), "lxd shutdown failed");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Command::new("pgrep")
        .args(["-x", "lxd"])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            Instant::now() < deadline,
            "lxd still runs a minute after its shutdown"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open("/var/log/cohort/lxd.out")
        .expect("lxd's output log");
    // `setsid -f`: the daemon in a session of its own, outliving this test; setsid returns at once.
    let started = Command::new("setsid")
        .args([
            "-f",
            "lxd",
            "--group",
            "root",
            "--logfile",
            "/var/log/cohort/lxd.log",
        ])
        .env("LXD_DIR", lxd_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone().expect("log fd")))
        .stderr(Stdio::from(log))
        .status()
        .expect("start lxd");
    assert!(started.success(), "setsid -f lxd failed");
    let ready = Command::new("lxd")
        .args(["waitready", "--timeout", "120"])
        .env("LXD_DIR", lxd_dir())
        .status()
        .expect("run lxd waitready");
    assert!(ready.success(), "LXD did not come back within 120 s");
}

async fn run_op(cluster: &Cluster, path: &str, token: &str) {
    let res = cluster
        .request(Method::POST, path, token)
        .json(&json!({}))
        .send()
        .await
        .expect("controller answers");
    assert_eq!(res.status(), 202, "{path}");
    let op: Value = res.json().await.expect("operation");
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(600))
        .await;
    assert_eq!(done["status"], "success", "{path}: {done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_stopped_through_cohort_stays_stopped_across_a_reboot() {
    let _alone = crate::alone().await;
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-boot", "instructor").await;
    let res = cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("boot1", "Reboots", "cohort/base")
        })
        .send()
        .await
        .expect("create course");
    assert_eq!(res.status(), 201);
    let (ann, ben) = (SshKey::generate(), SshKey::generate());
    let res = cluster
        .request(Method::POST, "/courses/boot1/roster", &teacher)
        .header("content-type", "text/csv")
        .body(format!(
            "username,name,email,ssh_key\nann,,,{}\nben,,,{}\n",
            ann.public_key(),
            ben.public_key()
        ))
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 200);
    run_op(&cluster, "/courses/boot1/provision", &teacher).await;
    run_op(&cluster, "/courses/boot1/students/ben/stop", &teacher).await;

    let lxd = &cluster.nodes[0].lxd;
    let state = |name: &str| {
        lxd.lxc(&["list", name, "-f", "csv", "-c", "s"])
            .trim()
            .to_string()
    };
    assert_eq!(state("boot1-ann"), "RUNNING");
    assert_eq!(state("boot1-ben"), "STOPPED");

    reboot_lxd();

    let deadline = Instant::now() + Duration::from_secs(120);
    while state("boot1-ann") != "RUNNING" {
        assert!(
            Instant::now() < deadline,
            "ann's container did not come back after the reboot"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // LXD starts every autostart container at once; give a wrong start time to happen.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(
        state("boot1-ben"),
        "STOPPED",
        "the stop Cohort made was undone by the reboot"
    );

    let csv = cluster
        .request(Method::GET, "/courses/boot1/endpoints?format=csv", &teacher)
        .send()
        .await
        .expect("endpoints")
        .text()
        .await
        .expect("csv");
    let row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("ann,"))
        .expect("ann's endpoint")
        .split(',')
        .collect();
    let port: u16 = row[4].parse().expect("port");
    ann.forget_hosts();
    let out = ann.run_when_up(row[3], port, "ann", "whoami", Duration::from_secs(120));
    assert!(
        out.status.success(),
        "ann cannot log in after the reboot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
