//! Issue 42: a partition of the target node in the middle of a move's copy, and again in the
//! middle of an evacuation's, in the lab of two nodes (each its own LXD daemon and agent, the
//! partition made with nftables in the target's namespace, `lab.rs`). The target is cut off
//! once the source has stopped the container (the copy under way) and healed 10 s later; the
//! operation then ends however it ends. What must hold, checked with each daemon's own `lxc`:
//! the student's container is on exactly one node, running there with its home volume, and the
//! database names that node.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::lab::{Lab, LabNode};
use cohort_proto::api::instances::MoveInstance;
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy};
use reqwest::Method as M;
use serde_json::{json, Value};

const COURSE: &str = "mf1";
const INSTANCE: &str = "mf1-s0";
const HOME: &str = "home-mf1-s0";
/// How long the target stays cut off.
const PARTITION: Duration = Duration::from_secs(10);

/// (the container's state on the node, if it is there; whether its home volume is there).
fn holding(node: &LabNode) -> (Option<String>, bool) {
    let listed = node.lxc(&["list", "-f", "csv", "-c", "ns"]);
    let state = listed
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{INSTANCE},")))
        .map(str::to_string);
    let volumes = node.lxc(&["query", "/1.0/storage-pools/cohort/volumes/custom"]);
    (state, volumes.contains(&format!("/{HOME}\"")))
}

async fn node_of(lab: &Lab) -> String {
    let inst: Value = lab
        .cluster
        .admin(M::GET, &format!("/instances/{INSTANCE}"), None)
        .await;
    inst["node"].as_str().expect("placed").to_string()
}

/// Runs `start` (a move or an evacuation of the container, away from the node it is on) and
/// partitions the other node while the copy runs; after the heal and the operation's end, the
/// container runs on exactly one node with its home, the one the database names.
async fn partitioned_during_copy(
    lab: &Lab,
    what: &str,
    start: impl std::future::Future<Output = Value>,
) {
    let from = node_of(lab).await;
    let source = lab.nodes.iter().find(|n| n.name == from).expect("node");
    let target = lab.nodes.iter().find(|n| n.name != from).expect("node");
    let op = start.await;
    let id = op["id"].as_str().expect("operation id").to_string();
    // The copy is under way once the source has stopped the container for its export.
    let deadline = Instant::now() + Duration::from_secs(60);
    while holding(source).0.as_deref() != Some("STOPPED") {
        assert!(
            Instant::now() < deadline,
            "{what}: the source never stopped the container"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    target.partition();
    tokio::time::sleep(PARTITION).await;
    target.heal();
    let done = lab
        .cluster
        .wait_operation(&id, Duration::from_secs(240))
        .await;
    eprintln!(
        "{what}: the operation ended {} ({})",
        done["status"], done["error"]
    );

    // Running on exactly one node, with its home there, the node the database names.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let named = node_of(lab).await;
        let holders: Vec<(&str, (Option<String>, bool))> = lab
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), holding(n)))
            .filter(|(_, (state, _))| state.is_some())
            .collect();
        let settled = holders.len() == 1
            && holders[0].0 == named
            && holders[0].1 == (Some("RUNNING".to_string()), true);
        if settled {
            eprintln!("{what}: runs on {named} only");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: the container is not running on exactly one node with its home: {holders:?}, \
             the database names {named}\n{done}\n{}\n{}",
            lab.cluster.controller_log(),
            lab.agent_logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partitioned_target_during_a_move_or_an_evacuation_leaves_one_running_copy() {
    let _alone = crate::alone().await;
    let begun = Instant::now();
    let phase = |what: &str| {
        eprintln!(
            "[move faults {:>5.1} s] {what}",
            begun.elapsed().as_secs_f64()
        )
    };
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;
    lab.add_node("west").await;
    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Move faults", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let roster = "username,name,email,ssh_key\ns0,Student,s0@uni.edu,\n".to_string();
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let id = lab.cluster.start_provision(COURSE, &teacher).await;
    lab.succeeds(&json!({"id": id}), Duration::from_secs(240))
        .await;
    phase("provisioned");

    let from = node_of(&lab).await;
    let other = if from == "east" { "west" } else { "east" };
    let path = format!("/instances/{INSTANCE}/move");
    let body = to_json(&MoveInstance {
        target: other.into(),
    });
    partitioned_during_copy(&lab, "move", lab.cluster.admin(M::POST, &path, Some(body))).await;
    phase("move with its target partitioned");

    let from = node_of(&lab).await;
    let path = format!("/nodes/{from}/evacuate");
    let body = to_json(&EvacuateNode {
        policy: EvacuatePolicy::Move,
    });
    partitioned_during_copy(
        &lab,
        "evacuation",
        lab.cluster.admin(M::POST, &path, Some(body)),
    )
    .await;
    phase("evacuation with its target partitioned");
}
