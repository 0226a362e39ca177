//! Issue 7, faults during a course provision, with real processes: the agent `kill -9`ed, the
//! controller `kill -9`ed, and PostgreSQL restarted (a private cluster of the test's own), each
//! in the middle of provisioning a course of [`STUDENTS`]. After the fault the operation must
//! complete with exactly one container per student in LXD, one distinct port per instance (the
//! same port in the database and in LXD's proxy device), no GPU slot held, and no operation left
//! unfinished. The three run one at a time (each starts [`STUDENTS`] systemd containers). Issue
//! 42 adds both kills in one run: the controller, then the agent, on a class of eight.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::pg::PrivatePg;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use reqwest::Method;
use serde_json::Value;

/// The size of the course each fault hits.
const STUDENTS: usize = 20;
/// How many containers exist in LXD before the fault lands.
const FAULT_AFTER: usize = 4;
/// Longest a provision may take, fault included.
const PROVISION_LIMIT: Duration = Duration::from_secs(1200);

/// This machine has 2 cores; at the default overcommit (4 instance cores per core) a node
/// takes 8 one-core students. Its pool has 40 GiB, and each student reserves 3 (a 2 GiB root
/// disk and a 64 MiB home, counted as a whole GiB); a btrfs pool is thin, so twice that is
/// promised. The test node takes the whole course.
const OVERCOMMIT: [(&str, &str); 2] = [
    ("COHORT_CPU_OVERCOMMIT", "16"),
    ("COHORT_DISK_OVERCOMMIT", "2"),
];

/// Course `code` with `students` students (no keys: each gets a password), its provision
/// started; returns the instructor's token and the operation id.
async fn start_provision(cluster: &Cluster, code: &str, students: usize) -> (String, String) {
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof", "instructor").await;
    let res = cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            home_mib: Some(64),
            ..course(code, "Faults", "cohort/base")
        })
        .send()
        .await
        .expect("create course");
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let mut roster = String::from("username,name,email,ssh_key\n");
    for i in 0..students {
        roster.push_str(&format!("s{i:02},Student {i},,\n"));
    }
    let res = cluster
        .request(Method::POST, &format!("/courses/{code}/roster"), &teacher)
        .header("content-type", "text/csv")
        .body(roster)
        .send()
        .await
        .expect("roster");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let id = cluster.start_provision(code, &teacher).await;
    (teacher, id)
}

/// Waits until `after` containers exist in the node's LXD project: the fault then lands
/// with the provision well under way.
async fn until_under_way(cluster: &Cluster, after: usize) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while cluster.nodes[0].lxd.instance_names().len() < after {
        assert!(
            Instant::now() < deadline,
            "provisioning never got under way:\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[derive(QueryableByName)]
struct Counts {
    #[diesel(sql_type = BigInt)]
    instances: i64,
    #[diesel(sql_type = BigInt)]
    ports: i64,
    #[diesel(sql_type = BigInt)]
    gpu_slots: i64,
    #[diesel(sql_type = BigInt)]
    unfinished: i64,
}

/// Everything the fault must not have broken, for a course of `count` students.
async fn assert_complete(
    cluster: &Cluster,
    (teacher, code, op): (&str, &str, &str),
    count: usize,
    started: Instant,
) {
    let done = cluster.wait_operation(op, PROVISION_LIMIT).await;
    assert_eq!(
        done["status"],
        "success",
        "{done}\n{}",
        cluster.controller_log()
    );
    eprintln!("{code}: provisioned in {:?}", started.elapsed());
    let lxd = &cluster.nodes[0].lxd;

    // LXD holds exactly one running container per student.
    let listed = lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    let names: Vec<&str> = listed.lines().filter_map(|l| l.split(',').next()).collect();
    let expected: HashSet<String> = (0..count).map(|i| format!("{code}-s{i:02}")).collect();
    let unique: HashSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(names.len(), count, "{listed}");
    assert_eq!(unique, expected, "{listed}");
    assert!(listed.lines().all(|l| l.ends_with(",RUNNING")), "{listed}");

    // The API shows each student's container on a distinct port, the one LXD forwards.
    let students: Value = cluster
        .request(Method::GET, &format!("/courses/{code}/students"), teacher)
        .send()
        .await
        .expect("students")
        .json()
        .await
        .expect("students json");
    let students = students.as_array().expect("students");
    assert_eq!(students.len(), count);
    let range = cluster.nodes[0].ssh_ports.first()..=cluster.nodes[0].ssh_ports.last();
    let mut ports = HashSet::new();
    for s in students {
        let name = s["instance"].as_str().expect("instance");
        let port = s["ssh_port"].as_u64().expect("ssh_port") as u16;
        assert!(range.contains(&port), "{s}");
        assert!(ports.insert(port), "port {port} given twice");
        assert_eq!(s["state"], "running", "{s}");
        let listen = lxd.lxc(&["config", "device", "get", name, "cohort-ssh", "listen"]);
        assert_eq!(listen.trim(), format!("tcp:127.0.0.1:{port}"), "{name}");
    }

    // The database agrees: as many rows and ports as students, no GPU slot, nothing unfinished.
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    let counts: Counts = diesel::sql_query(
        "SELECT (SELECT count(*) FROM instances) AS instances, \
                (SELECT count(DISTINCT ssh_port) FROM instances) AS ports, \
                (SELECT count(*) FROM gpu_allocations) AS gpu_slots, \
                (SELECT count(*) FROM operations WHERE status IN ('pending', 'running')) \
                    AS unfinished",
    )
    .get_result(&mut conn)
    .expect("counts");
    assert_eq!(counts.instances, count as i64);
    assert_eq!(counts.ports, count as i64);
    assert_eq!(counts.gpu_slots, 0);
    assert_eq!(counts.unfinished, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn agent_killed_mid_provision_completes_without_duplicates() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let mut cluster = Cluster::start_configured(1, None, &OVERCOMMIT).await;
    let (teacher, op) = start_provision(&cluster, "fa", STUDENTS).await;
    until_under_way(&cluster, FAULT_AFTER).await;
    cluster.nodes[0].kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.nodes[0].restart();
    assert_complete(&cluster, (&teacher, "fa", &op), STUDENTS, started).await;
    eprintln!("agent kill: whole test {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn controller_killed_mid_provision_resumes_and_completes() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let mut cluster = Cluster::start_configured(1, None, &OVERCOMMIT).await;
    let (teacher, op) = start_provision(&cluster, "fc", STUDENTS).await;
    until_under_way(&cluster, FAULT_AFTER).await;
    cluster.restart_controller();
    assert_complete(&cluster, (&teacher, "fc", &op), STUDENTS, started).await;
    eprintln!("controller kill: whole test {:?}", started.elapsed());
}

/// Issue 42: the controller `kill -9`ed, then the agent, both in the middle of one provision (a
/// small class: it runs in about a minute); both start again and the class ends complete, with
/// nothing made or given twice and no operation left running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn controller_then_agent_killed_mid_provision_completes() {
    const CLASS: usize = 8;
    let _alone = crate::alone().await;
    let started = Instant::now();
    let mut cluster = Cluster::start_configured(1, None, &OVERCOMMIT).await;
    let (teacher, op) = start_provision(&cluster, "fb", CLASS).await;
    until_under_way(&cluster, 2).await;
    cluster.controller.kill();
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.nodes[0].kill();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.nodes[0].restart();
    cluster.restart_controller();
    assert_complete(&cluster, (&teacher, "fb", &op), CLASS, started).await;
    eprintln!(
        "controller then agent kill: whole test {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_restarted_mid_provision_reconnects_and_completes() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let pg = PrivatePg::start();
    let cluster = Cluster::start_configured(1, Some(&pg.url()), &OVERCOMMIT).await;
    let (teacher, op) = start_provision(&cluster, "fp", STUDENTS).await;
    until_under_way(&cluster, FAULT_AFTER).await;
    pg.stop_server();
    tokio::time::sleep(Duration::from_secs(5)).await;
    pg.start_server();
    assert_complete(&cluster, (&teacher, "fp", &op), STUDENTS, started).await;
    eprintln!("postgres restart: whole test {:?}", started.elapsed());
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn drift_rows(cluster: &Cluster, instance: &str) -> i64 {
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    diesel::sql_query(
        "SELECT count(*) AS n FROM audit_log \
         WHERE action = 'drift' AND object_kind = 'instance' AND object = $1",
    )
    .bind::<diesel::sql_types::Text, _>(instance)
    .get_result::<Count>(&mut conn)
    .expect("audit rows")
    .n
}

/// Polls `GET /instances/{name}` until `check` holds; returns the instance.
async fn until_instance(
    cluster: &Cluster,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let inst = cluster
            .admin(Method::GET, &format!("/instances/{name}"), None)
            .await;
        if check(&inst) {
            return inst;
        }
        assert!(
            Instant::now() < deadline,
            "{name} never {what}: {inst}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

async fn provision_drift(cluster: &Cluster, teacher: &str) {
    let op: Value = cluster
        .request(Method::POST, "/courses/fd/provision", teacher)
        .send()
        .await
        .expect("provision")
        .json()
        .await
        .expect("op");
    let id = op["id"].as_str().expect("id");
    let done = cluster.wait_operation(id, Duration::from_secs(600)).await;
    assert_eq!(done["status"], "success", "{done}");
}

/// Drift: containers stopped and deleted in LXD behind Cohort's back are reported by the poller
/// (state and reason on the instance, one audit row each) and left alone under the default
/// `report` policy; under `repair` they are started and re-created on their own ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drift_is_reported_and_repaired_by_policy() {
    let _alone = crate::alone().await;
    let started = Instant::now();
    let mut cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof", "instructor").await;
    let res = cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("fd", "Drift", "cohort/base")
        })
        .send()
        .await
        .expect("create course");
    assert_eq!(res.status(), 201);
    let res = cluster
        .request(Method::POST, "/courses/fd/roster", &teacher)
        .header("content-type", "text/csv")
        .body("username,name,email,ssh_key\ns00,A,,\ns01,B,,\n")
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 200);
    provision_drift(&cluster, &teacher).await;
    let lxd = &cluster.nodes[0].lxd;
    let drifted = |inst: &Value, state: &str| {
        inst["observed_state"] == state
            && inst["error"]
                .as_str()
                .is_some_and(|e| e.starts_with("drift:"))
    };

    // Report (the default): shown and audited once per change, nothing touched. (`lxc delete
    // --force` stops first, so a poll may also catch fd-s01 stopped on its way out.)
    lxd.lxc(&["stop", "--force", "fd-s00"]);
    lxd.lxc(&["delete", "--force", "fd-s01"]);
    until_instance(&cluster, "fd-s00", "reported stopped", |i| {
        drifted(i, "stopped")
    })
    .await;
    until_instance(&cluster, "fd-s01", "reported missing", |i| {
        drifted(i, "missing")
    })
    .await;
    let s01_rows = drift_rows(&cluster, "fd-s01");
    assert!((1..=2).contains(&s01_rows), "{s01_rows} drift rows");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "fd-s00,STOPPED\n"
    );
    assert_eq!(drift_rows(&cluster, "fd-s00"), 1, "reported again");
    assert_eq!(drift_rows(&cluster, "fd-s01"), s01_rows, "reported again");
    let still = cluster.admin(Method::GET, "/instances/fd-s01", None).await;
    assert!(drifted(&still, "missing"), "{still}");

    // Repair: provision puts things right, then the same drift again is repaired by itself.
    cluster.restart_controller_with(&[("COHORT_DRIFT_POLICY", "repair")]);
    let lxd = &cluster.nodes[0].lxd;
    provision_drift(&cluster, &teacher).await;
    let port = cluster.admin(Method::GET, "/instances/fd-s01", None).await["ssh_port"]
        .as_u64()
        .expect("port");
    lxd.lxc(&["stop", "--force", "fd-s00"]);
    lxd.lxc(&["delete", "--force", "fd-s01"]);
    let repaired = |i: &Value| i["observed_state"] == "running" && i["error"].is_null();
    until_instance(&cluster, "fd-s00", "repaired", |i| {
        repaired(i) && drift_rows(&cluster, "fd-s00") == 2
    })
    .await;
    until_instance(&cluster, "fd-s01", "repaired", |i| {
        repaired(i) && drift_rows(&cluster, "fd-s01") > s01_rows
    })
    .await;
    assert_eq!(
        lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "fd-s00,RUNNING\nfd-s01,RUNNING\n"
    );
    let listen = lxd.lxc(&["config", "device", "get", "fd-s01", "cohort-ssh", "listen"]);
    assert_eq!(listen.trim(), format!("tcp:127.0.0.1:{port}"));
    eprintln!("drift: whole test {:?}", started.elapsed());
}
