//! Issue 42, a fault not yet tested: two controllers on one database, each running its worker
//! and its poller, through a whole class's provision, a move and a node certificate's renewal.
//! The lab's controller (`lab.rs`) and a second `cohort-controller serve` on the same database
//! and state directory (same CA) under another worker name, both polling every second, with
//! two nodes, each its own LXD daemon and agent. A class of six is provisioned, one student is
//! moved to the other node, and while the move runs the target's certificate is made due on the
//! books (as `renewal_race.rs` does), so both pollers find it due at once.
//!
//! Every piece of work must be done once: each operation item succeeded on its first attempt;
//! each daemon's own lifecycle events (`lxc monitor`, started before anything) show every
//! student's container created once, the moved one once on each node; one audit row per
//! operation and one renewal; ports distinct per node; no operation left unfinished. The moved
//! container runs on exactly the target, the target serves its one live certificate, and both
//! controllers answer `/healthz`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_controller::agent_client::MtlsConnector;
use cohort_controller::app::state::connect_pinned;
use cohort_controller::db::models::node::Node;
use cohort_controller::db::models::node_certificate::NodeCertificate;
use cohort_controller::nodes::pki::Pki;
use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::controller::{test_config, ControllerProcess};
use cohort_e2e::lab::{Lab, LabNode};
use cohort_e2e::PortRange;
use cohort_proto::api::instances::MoveInstance;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use reqwest::Method as M;
use serde_json::{json, Value};

const COURSE: &str = "tc";
const STUDENTS: usize = 6;
/// The student who moves.
const MOVER: &str = "tc-s0";

/// `lxc monitor --type=lifecycle` on one node's daemon, its events in a file.
struct Lifecycle {
    child: Child,
    file: std::path::PathBuf,
}

impl Lifecycle {
    fn watch(node: &LabNode, dir: &Path) -> Self {
        let file = dir.join(format!("lifecycle-{}.json", node.name));
        let out = std::fs::File::create(&file).expect("events file");
        let child = Command::new("lxc")
            .args(["monitor", "--type=lifecycle", "--format=json"])
            .env("LXD_DIR", node.lxd_dir())
            .stdout(Stdio::from(out))
            .stderr(Stdio::null())
            .spawn()
            .expect("lxc monitor");
        Lifecycle { child, file }
    }

    /// How many `instance-created` events each instance had.
    fn created(&self) -> HashMap<String, usize> {
        let text = std::fs::read_to_string(&self.file).unwrap_or_default();
        let mut counts = HashMap::new();
        for event in text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        {
            if event["metadata"]["action"] != "instance-created" {
                continue;
            }
            let source = event["metadata"]["source"].as_str().unwrap_or_default();
            let name = source
                .split('?')
                .next()
                .and_then(|s| s.rsplit('/').next())
                .unwrap_or_default();
            *counts.entry(name.to_string()).or_insert(0) += 1;
        }
        counts
    }
}

impl Drop for Lifecycle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(QueryableByName, Debug)]
struct Row {
    #[diesel(sql_type = Text)]
    what: String,
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `(what, n)` rows of `sql`, for assertions that print what they found.
fn rows(db_url: &str, sql: &str) -> Vec<(String, i64)> {
    let mut conn = PgConnection::establish(db_url).expect("connect");
    diesel::sql_query(sql)
        .load::<Row>(&mut conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .map(|r| (r.what, r.n))
        .collect()
}

/// The instances each node's daemon holds, as `lxc list` gives them: name → state.
fn held(node: &LabNode) -> HashMap<String, String> {
    node.lxc(&["list", "-f", "csv", "-c", "ns"])
        .lines()
        .filter_map(|l| l.split_once(','))
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect()
}

/// `GET /healthz` of the controller on `port`, trusting the cluster's CA; its status.
async fn healthz(ca: &Path, port: u16) -> reqwest::StatusCode {
    let ca = std::fs::read(ca).expect("CA");
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA pem"))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    http.get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .expect("the controller answers")
        .status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_controllers_provision_move_and_renew_each_item_once() {
    let _alone = crate::alone().await;
    let begun = Instant::now();
    let phase = |what: &str| eprintln!("[two ctl {:>5.1} s] {what}", begun.elapsed().as_secs_f64());
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;
    lab.add_node("west").await;
    let events = tempfile::tempdir().expect("events dir");
    let watches: Vec<Lifecycle> = lab
        .nodes
        .iter()
        .map(|n| Lifecycle::watch(n, events.path()))
        .collect();
    lab.cluster.import_base_image("cohort/base").await;

    // The second controller: same database, same state directory (CA, image store), its own
    // port and worker name; a worker and a poller of its own from the start. Both are behind
    // one public URL, the lab's controller's on the test network (where nodes fetch images).
    let ports = PortRange::claim();
    let dir = lab.cluster.controller_dir();
    let gateway = lab.nodes[0].address.octets();
    let public = format!(
        "https://{}.{}.{}.1:{}",
        gateway[0], gateway[1], gateway[2], lab.cluster.controller.port
    );
    let second = ControllerProcess::start(
        &lab.cluster.db_url,
        &dir,
        ports.port(0),
        &[
            ("COHORT_WORKER_ID", "second-controller"),
            ("COHORT_PUBLIC_URL", &public),
        ],
    );
    phase("two controllers, two nodes");

    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Two controllers", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let mut roster = String::from("username,name,email,ssh_key\n");
    for i in 0..STUDENTS {
        roster.push_str(&format!("s{i},Student {i},s{i}@uni.edu,\n"));
    }
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let provision = lab.cluster.start_provision(COURSE, &teacher).await;
    lab.succeeds(&json!({"id": provision}), Duration::from_secs(240))
        .await;
    phase("provisioned");

    // The move, and the target's certificate due on the books while it runs.
    let inst = lab
        .cluster
        .admin(M::GET, &format!("/instances/{MOVER}"), None)
        .await;
    let from = inst["node"].as_str().expect("placed").to_string();
    let to = if from == "east" { "west" } else { "east" }.to_string();
    let mut conn = PgConnection::establish(&lab.cluster.db_url).expect("connect");
    let old_live = NodeCertificate::live(&mut conn, &to).unwrap();
    assert_eq!(old_live.len(), 1, "{old_live:?}");
    let moved = lab
        .cluster
        .admin(
            M::POST,
            &format!("/instances/{MOVER}/move"),
            Some(to_json(&MoveInstance { target: to.clone() })),
        )
        .await;
    use cohort_controller::db::schema::node_certificates as nc;
    diesel::update(nc::table.filter(nc::node_name.eq(&to)))
        .set(
            nc::issued_at.eq(diesel::dsl::sql::<diesel::sql_types::Timestamptz>(
                "now() - interval '1000 days'",
            )),
        )
        .execute(&mut conn)
        .unwrap();
    let move_id = moved["id"].as_str().expect("operation id").to_string();
    lab.succeeds(&moved, Duration::from_secs(180)).await;
    phase("moved");

    // The renewal: both pollers found it due; one renewed (bounded wait for it).
    let renewed_sql = format!(
        "SELECT action AS what, count(*) AS n FROM audit_log \
         WHERE action = 'node_certificate_renewed' AND object = '{to}' GROUP BY action"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows(&lab.cluster.db_url, &renewed_sql).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{to}'s certificate was never renewed:\n{}",
            lab.cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Two more polls of each controller: a second renewal would show by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    phase("renewed");

    // Every item of both operations succeeded, on its first attempt.
    let items = rows(
        &lab.cluster.db_url,
        &format!(
            "SELECT i.target || ' ' || i.action || ' ' || i.status || ' attempts' AS what, \
                    i.attempts::int8 AS n \
             FROM operation_items i WHERE i.operation_id IN ('{provision}', '{move_id}') \
             ORDER BY i.target"
        ),
    );
    assert_eq!(items.len(), STUDENTS + 1, "{items:?}");
    for (what, attempts) in &items {
        assert!(what.contains(" success "), "{items:?}");
        assert_eq!(*attempts, 1, "an item ran twice: {items:?}");
    }
    // Nothing unfinished; one audit row per operation; one renewal.
    let unfinished = rows(
        &lab.cluster.db_url,
        "SELECT kind || ' ' || status AS what, 1::int8 AS n FROM operations \
         WHERE status IN ('pending', 'running')",
    );
    assert!(unfinished.is_empty(), "left unfinished: {unfinished:?}");
    let audited = rows(
        &lab.cluster.db_url,
        &format!(
            "SELECT detail->>'operation' AS what, count(*) AS n FROM audit_log \
             WHERE detail->>'operation' IN ('{provision}', '{move_id}') GROUP BY 1 ORDER BY 1"
        ),
    );
    assert_eq!(audited.len(), 2, "an audit row per operation: {audited:?}");
    assert!(audited.iter().all(|(_, n)| *n == 1), "{audited:?}");
    let renewals = rows(&lab.cluster.db_url, &renewed_sql);
    assert_eq!(
        renewals,
        vec![("node_certificate_renewed".to_string(), 1)],
        "renewed once"
    );

    // Ports: distinct on each node, every student placed and running.
    let placed = rows(
        &lab.cluster.db_url,
        "SELECT coalesce(n.name, '-') || ':' || coalesce(i.ssh_port::text, '-') || ' ' \
                || i.observed_state AS what, count(*) AS n \
         FROM instances i LEFT JOIN nodes n ON n.id = i.node_id GROUP BY 1 ORDER BY 1",
    );
    assert_eq!(placed.len(), STUDENTS, "one port each: {placed:?}");
    assert!(
        placed
            .iter()
            .all(|(w, n)| *n == 1 && !w.contains(":-") && w.ends_with(" running")),
        "{placed:?}"
    );

    // The daemons' own view: one container per student across both nodes, running, the
    // mover on the target; each created once (the mover once on each node).
    let holdings: Vec<(String, HashMap<String, String>)> = lab
        .nodes
        .iter()
        .map(|n| (n.name.clone(), held(n)))
        .collect();
    let mut seen = HashSet::new();
    for (node, held) in &holdings {
        for (name, state) in held {
            assert!(
                seen.insert(name.clone()),
                "{name} on two nodes: {holdings:?}"
            );
            assert_eq!(state, "RUNNING", "{name} on {node}: {holdings:?}");
        }
    }
    let expected: HashSet<String> = (0..STUDENTS).map(|i| format!("{COURSE}-s{i}")).collect();
    assert_eq!(seen, expected, "{holdings:?}");
    let target = holdings.iter().find(|(n, _)| *n == to).expect("target");
    assert!(target.1.contains_key(MOVER), "{holdings:?}");
    let created: Vec<(String, HashMap<String, usize>)> = lab
        .nodes
        .iter()
        .zip(&watches)
        .map(|(n, w)| (n.name.clone(), w.created()))
        .collect();
    let mut made: HashMap<String, usize> = HashMap::new();
    for (node, counts) in &created {
        for (name, n) in counts {
            assert_eq!(*n, 1, "{name} created {n} times on {node}: {created:?}");
            *made.entry(name.clone()).or_insert(0) += 1;
        }
    }
    for name in &expected {
        let want = if name == MOVER { 2 } else { 1 };
        assert_eq!(made.get(name), Some(&want), "{name}: {created:?}");
    }
    drop(watches);

    // The target serves its one live certificate, the renewed one, and is online.
    let live = NodeCertificate::live(&mut conn, &to).unwrap();
    assert_eq!(live.len(), 1, "one live certificate: {live:?}");
    assert_ne!(live[0].fingerprint, old_live[0].fingerprint, "renewed");
    let pki = Arc::new(Pki::load(&dir).expect("the controllers' CA"));
    let config = test_config(&lab.cluster.db_url, &dir);
    let connector = MtlsConnector::new(&pki, config.node_calls);
    let node = Node::by_name(&mut conn, &to).unwrap().expect("target node");
    let agent = connect_pinned(&connector, &node, &live).unwrap();
    let served = agent
        .identity()
        .await
        .expect("the target answers")
        .fingerprint;
    assert_eq!(served, live[0].fingerprint, "the live one is served");
    lab.cluster
        .wait_node_state(&to, "online", Duration::from_secs(10))
        .await;

    // Both controllers healthy.
    let ca = dir.join("ca.crt");
    assert_eq!(
        healthz(&ca, lab.cluster.controller.port).await,
        200,
        "{}",
        lab.cluster.controller_log()
    );
    assert_eq!(healthz(&ca, second.port).await, 200);
    phase("checked");
}
