//! Issue 42, defect 2: a move never deletes the last copy of a container, whatever the database
//! says. Two nodes with their own LXD daemons (the lab of `lab.rs`); one student's container is
//! provisioned on one of them. Then the state a restored backup taken mid-evacuation leaves is
//! made with the daemons' own `lxc`: the container and its home are on the other node (exported
//! and imported, as the evacuation's copy did) and gone from the first, while the database still
//! names the first. A move to the other node then finds no container on its source; before the
//! fix its failed copy "undid" itself by deleting the target's copies, the only ones left. Now
//! the agents are asked where the copies are: the target's is kept, the database points at it,
//! and the student's container runs there with its files.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::lab::{Lab, LabNode};
use cohort_proto::api::instances::MoveInstance;
use reqwest::Method as M;
use serde_json::{json, Value};

const COURSE: &str = "ms1";
const INSTANCE: &str = "ms1-s0";
const HOME: &str = "home-ms1-s0";

async fn instance(lab: &Lab) -> Value {
    lab.cluster
        .admin(M::GET, &format!("/instances/{INSTANCE}"), None)
        .await
}

/// Whether the node's daemon has the container, and whether it has its home volume.
fn holds(node: &LabNode) -> (bool, bool) {
    let instances = node.lxc(&["list", "-f", "csv", "-c", "n"]);
    let volumes = node.lxc(&["query", "/1.0/storage-pools/cohort/volumes/custom"]);
    (
        instances.lines().any(|l| l.trim() == INSTANCE),
        volumes.contains(&format!("/{HOME}\"")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_keeps_the_targets_copy_when_the_source_has_none() {
    let begun = Instant::now();
    let phase = |what: &str| eprintln!("[stale {:>5.1} s] {what}", begun.elapsed().as_secs_f64());
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;
    lab.add_node("west").await;
    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Stale", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let roster = "username,name,email,ssh_key\ns0,Student,s0@uni.edu,\n".to_string();
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let id = lab.cluster.start_provision(COURSE, &teacher).await;
    lab.succeeds(&json!({"id": id}), Duration::from_secs(240))
        .await;
    phase("provisioned");

    let first = instance(&lab).await["node"]
        .as_str()
        .expect("placed")
        .to_string();
    let other = if first == "east" { "west" } else { "east" }.to_string();
    let (src, dst) = {
        let a = lab
            .nodes
            .iter()
            .position(|n| n.name == first)
            .expect("node");
        (&lab.nodes[a], &lab.nodes[1 - a])
    };
    src.lxc(&[
        "exec",
        INSTANCE,
        "--",
        "sh",
        "-c",
        "echo root-bytes > /etc/cohort-test && sync",
    ]);
    // The evacuation's copy, done before the backup was restored: the container and its home
    // are on the other node only.
    let dir = tempfile::tempdir().expect("temp dir");
    let (ctar, vtar) = (dir.path().join("c.tar.gz"), dir.path().join("v.tar.gz"));
    let (ctar, vtar) = (ctar.to_str().expect("utf-8"), vtar.to_str().expect("utf-8"));
    src.lxc(&["stop", INSTANCE]);
    src.lxc(&["storage", "volume", "export", "cohort", HOME, vtar]);
    src.lxc(&["export", INSTANCE, ctar]);
    dst.lxc(&["storage", "volume", "import", "cohort", vtar, HOME]);
    dst.lxc(&["import", ctar]);
    src.lxc(&["delete", INSTANCE]);
    src.lxc(&["storage", "volume", "delete", "cohort", HOME]);
    assert_eq!(holds(src), (false, false));
    assert_eq!(holds(dst), (true, true));
    phase("the only copy is on the other node; the database names the first");

    let op = lab
        .cluster
        .admin(
            M::POST,
            &format!("/instances/{INSTANCE}/move"),
            Some(to_json(&MoveInstance {
                target: other.clone(),
            })),
        )
        .await;
    let op_id = op["id"].as_str().expect("operation id").to_string();
    // Bounded: until the move ends, the target's copy must be there at every look.
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let dst = lab.nodes.iter().find(|n| n.name == other).expect("node");
        assert_eq!(
            holds(dst),
            (true, true),
            "the move deleted the only copy of the container and its home on {other}\n{}\n{}",
            lab.cluster.controller_log(),
            lab.agent_logs()
        );
        let now: Value = lab
            .cluster
            .admin(M::GET, &format!("/operations/{op_id}"), None)
            .await;
        if ["success", "failure", "cancelled"].contains(&now["status"].as_str().unwrap_or("")) {
            break now;
        }
        assert!(Instant::now() < deadline, "the move still runs: {now}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(done["status"], "success", "{done}");
    let inst = instance(&lab).await;
    assert_eq!(
        inst["node"],
        other.as_str(),
        "the database names the copy's node: {inst}"
    );
    assert_eq!(inst["observed_state"], "running", "{inst}");
    let dst = lab.nodes.iter().find(|n| n.name == other).expect("node");
    assert_eq!(holds(dst), (true, true));
    let read = dst.lxc(&["exec", INSTANCE, "--", "cat", "/etc/cohort-test"]);
    assert_eq!(
        read, "root-bytes\n",
        "the root disk is the one that was copied"
    );
    let src = lab.nodes.iter().find(|n| n.name == first).expect("node");
    assert_eq!(holds(src), (false, false), "{first} keeps nothing of it");
    phase("kept and adopted");
}
