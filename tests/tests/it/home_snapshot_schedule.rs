//! Issue 45: the daemon's own scheduler makes a home's snapshots, on LXD and on Incus. A course
//! with `home_snapshots = hourly` gives each home the daemon's `snapshots.schedule`, `expiry` and
//! `pattern`; the test then moves only the schedule to every minute (`* * * * *`, a cron
//! expression both daemons take for volumes) through the daemon itself, so that a snapshot is
//! due within two minutes instead of on the hour. Nothing of Cohort's makes it: the snapshot
//! the daemon makes takes Cohort's pattern (`auto<N>`) and the course's expiry, `cohort home
//! snapshots` lists it, and `cohort home restore` from it brings back a file deleted after it.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestLxd;
use reqwest::Method;
use serde_json::Value;

use crate::cli_support::Cli;

/// The longest the daemon is given to make a snapshot once the schedule is every minute.
const FIRE_WITHIN: Duration = Duration::from_secs(150);

/// A course container's home volume, as the controller names it (`home-<instance>`, at most
/// 63 characters).
fn home_volume(instance: &str) -> String {
    let name: String = format!("home-{instance}").chars().take(63).collect();
    name.trim_end_matches('-').to_string()
}

async fn the_daemon_snapshots_a_home_on_schedule(daemon: TestDaemon, code: &str) {
    let mut cluster = Cluster::start(0).await;
    cluster.add_node_in("node1", TestLxd::on(daemon)).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user(&format!("prof-{code}"), "instructor").await;
    cluster
        .create_course(
            &prof,
            CreateCourse {
                memory_mib: Some(256),
                disk_gib: Some(2),
                home_snapshots: Some("hourly".into()),
                home_snapshots_keep: Some(3),
                ..course(code, "Scheduled snapshots", "cohort/base")
            },
        )
        .await;
    let key = SshKey::generate();
    cluster
        .import_roster(
            &prof,
            code,
            format!(
                "username,name,email,ssh_key\nsam,Sam,,{}\n",
                key.public_key()
            ),
        )
        .await;
    cluster.provision(code, &prof).await;
    let students: Value = cluster
        .call(
            &prof,
            Method::GET,
            &format!("/courses/{code}/students"),
            None,
        )
        .await;
    let instance = students[0]["instance"]
        .as_str()
        .expect("instance")
        .to_string();
    let port = students[0]["ssh_port"].as_u64().expect("port") as u16;
    let ssh = |cmd: &str| {
        let out = key.run_when_up("127.0.0.1", port, "sam", cmd, Duration::from_secs(120));
        assert!(
            out.status.success(),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    ssh("printf 'before the snapshot' > essay.txt");

    let volume = home_volume(&instance);
    let lxd = &cluster.nodes[0].lxd;
    let get = |key: &str| {
        lxd.lxc(&["storage", "volume", "get", "cohort", &volume, key])
            .trim()
            .to_string()
    };
    assert_eq!(
        [
            get("snapshots.schedule"),
            get("snapshots.expiry"),
            get("snapshots.pattern")
        ],
        ["@hourly", "3H", "auto%d"],
        "the course's schedule on the home"
    );
    let student = cluster.token_for("sam").await;
    let cli = Cli::of_cluster(&cluster, &student);
    let listed = || -> Vec<Value> {
        serde_json::from_str(&cli.ok(&["home", "snapshots", &instance, "-f", "json"]))
            .expect("json")
    };
    assert!(listed().is_empty(), "no snapshot before the schedule fires");

    // Only the schedule moves to every minute; the daemon does the rest.
    lxd.lxc(&[
        "storage",
        "volume",
        "set",
        "cohort",
        &volume,
        "snapshots.schedule",
        "* * * * *",
    ]);
    let started = Instant::now();
    let since = chrono::Utc::now();
    let snapshot = loop {
        if let Some(first) = listed().into_iter().next() {
            break first;
        }
        assert!(
            started.elapsed() < FIRE_WITHIN,
            "{daemon:?} made no snapshot of {volume} in {FIRE_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let seen = chrono::Utc::now();
    eprintln!(
        "{daemon:?}: scheduled snapshot after {:?}",
        started.elapsed()
    );
    // Back to the course's hourly schedule, so no second snapshot lands under the restore.
    lxd.lxc(&[
        "storage",
        "volume",
        "set",
        "cohort",
        &volume,
        "snapshots.schedule",
        "@hourly",
    ]);
    let name = snapshot["name"].as_str().expect("name").to_string();
    assert!(
        name.strip_prefix("auto")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        "Cohort's pattern: {snapshot}"
    );
    // LXD 5.0 does not say when a volume snapshot was taken; its expiry is `keep` hours on
    // from then, which was between the schedule's change and the listing.
    let expires: chrono::DateTime<chrono::Utc> = snapshot["expires_at"]
        .as_str()
        .expect("expires_at")
        .parse()
        .expect("time");
    let three = chrono::Duration::hours(3);
    let slack = chrono::Duration::seconds(90);
    assert!(
        expires > since + three - slack && expires < seen + three + slack,
        "kept three hours (home_snapshots_keep 3, hourly): {snapshot}, asked at {since}"
    );

    // The student deletes the file; the restore from the daemon's snapshot brings it back.
    ssh("rm essay.txt && test ! -e essay.txt");
    cli.ok(&["-q", "home", "restore", &instance, &name]);
    assert_eq!(ssh("cat essay.txt"), "before the snapshot");
    let audit = cluster
        .admin(Method::GET, "/audit?action=restore_home", None)
        .await;
    assert!(audit.to_string().contains(&name), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lxd_makes_a_scheduled_home_snapshot_that_restores() {
    the_daemon_snapshots_a_home_on_schedule(TestDaemon::Lxd, "sched1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn incus_makes_a_scheduled_home_snapshot_that_restores() {
    the_daemon_snapshots_a_home_on_schedule(TestDaemon::Incus, "sched2").await;
}
