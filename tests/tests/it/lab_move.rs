//! Issue 26, moving a student between separate machines with their data: two nodes with their
//! own LXD daemons (the lab of `lab.rs`), one student's container with a file in its root disk
//! and one in its home. `POST /instances/{name}/move` (what `cohort move NAME --target NODE`
//! sends) takes it to the other node: both files are there, the student logs in with real ssh
//! on the new endpoint with the same key, and the host key is the one they verified before
//! (ssh with `StrictHostKeyChecking=yes` against the recorded key). Nothing of it is left on the
//! node it left. Then that node is evacuated with the move policy (it goes back) and restored
//! (it comes again), and the files survive both ways. A move that fails part-way (the target
//! holds what it cannot clear) leaves the student their running container on the source.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::lab::{Lab, LabNode};
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::instances::MoveInstance;
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy};
use reqwest::Method as M;
use serde_json::{json, Value};

const COURSE: &str = "mv1";
const STUDENT: &str = "s0";
const INSTANCE: &str = "mv1-s0";
const HOME: &str = "home-mv1-s0";
/// What the student reads back after each move: their home file, then the root disk's.
const FILES: &str = "home-bytes\nroot-bytes\n";

async fn instance(lab: &Lab) -> Value {
    lab.cluster
        .admin(M::GET, &format!("/instances/{INSTANCE}"), None)
        .await
}

/// Names of the daemon's instances and of its pool's custom volumes.
fn holdings(node: &LabNode) -> (String, String) {
    let instances = node.lxc(&["list", "-f", "csv", "-c", "n"]);
    let volumes = node.lxc(&["query", "/1.0/storage-pools/cohort/volumes/custom"]);
    let volumes: Vec<String> = serde_json::from_str(&volumes).expect("volume URLs");
    let customs: Vec<&str> = volumes
        .iter()
        .filter_map(|url| url.rsplit('/').next())
        .collect();
    (instances.trim().to_string(), customs.join(","))
}

/// The student's endpoint as the course's export gives it: (node, host, port).
async fn endpoint(lab: &Lab, teacher: &str) -> (String, String, u16) {
    let csv = lab
        .cluster
        .request(
            M::GET,
            &format!("/courses/{COURSE}/endpoints?format=csv"),
            teacher,
        )
        .send()
        .await
        .expect("endpoints")
        .text()
        .await
        .expect("csv");
    let row: Vec<&str> = csv
        .lines()
        .nth(1)
        .expect("one student")
        .split(',')
        .collect();
    (
        row[2].to_string(),
        row[3].to_string(),
        row[4].parse().expect("port"),
    )
}

/// Logs in on the course's current endpoint, checking the host against `host_key` only (a
/// changed key is refused), until sshd answers (bounded); the output of `cmd`.
async fn login(lab: &Lab, teacher: &str, key: &SshKey, host_key: &str, cmd: &str) -> String {
    let (node, host, port) = endpoint(lab, teacher).await;
    let address = lab
        .nodes
        .iter()
        .find(|n| n.name == node)
        .expect("endpoint names a lab node")
        .address;
    assert_eq!(host, address.to_string(), "the endpoint is its node's");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = key.run_verified(&host, port, host_key, STUDENT, cmd);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            Instant::now() < deadline,
            "{STUDENT} cannot log in on {node} ({host}:{port}) with the host key {host_key}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            lab.agent_logs()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// After a move to `to`: the row names it, the host key is unchanged, the student logs in
/// there and finds both files, and `from` holds neither the container nor its home.
async fn arrived(lab: &Lab, teacher: &str, key: &SshKey, host_key: &str, to: &str, from: &str) {
    let inst = instance(lab).await;
    assert_eq!(inst["node"], to, "{inst}");
    assert_eq!(inst["observed_state"], "running", "{inst}");
    assert_eq!(inst["ssh_host_key"], host_key, "the host key moved with it");
    let (node, _, port) = endpoint(lab, teacher).await;
    assert_eq!(node, to, "the course's endpoints name the new node");
    assert_eq!(inst["ssh_port"], port, "{inst}");
    let read = login(
        lab,
        teacher,
        key,
        host_key,
        "cat ~/notes.txt /etc/cohort-test",
    )
    .await;
    assert_eq!(read, FILES, "the files in the home and the root disk moved");
    let to_node = lab.nodes.iter().find(|n| n.name == to).expect("node");
    assert_eq!(holdings(to_node), (INSTANCE.to_string(), HOME.to_string()));
    let from_node = lab.nodes.iter().find(|n| n.name == from).expect("node");
    assert_eq!(
        holdings(from_node),
        (String::new(), String::new()),
        "{from} keeps nothing of it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_student_moves_between_machines_with_root_disk_and_home() {
    let begun = Instant::now();
    let phase = |what: &str| eprintln!("[move {:>5.1} s] {what}", begun.elapsed().as_secs_f64());
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;
    lab.add_node("west").await;
    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Moving", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let key = SshKey::generate();
    let roster = format!(
        "username,name,email,ssh_key\n{STUDENT},Student,{STUDENT}@uni.edu,{}\n",
        key.public_key()
    );
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let id = lab.cluster.start_provision(COURSE, &teacher).await;
    lab.succeeds(&json!({"id": id}), Duration::from_secs(240))
        .await;
    phase("provisioned");

    let inst = instance(&lab).await;
    let host_key = inst["ssh_host_key"]
        .as_str()
        .expect("a host key")
        .to_string();
    let first = inst["node"].as_str().expect("placed").to_string();
    let other = if first == "east" { "west" } else { "east" }.to_string();
    let wrote = login(
        &lab,
        &teacher,
        &key,
        &host_key,
        "echo home-bytes > ~/notes.txt && sudo -n sh -c 'echo root-bytes > /etc/cohort-test' && sync && echo ok",
    )
    .await;
    assert_eq!(wrote, "ok\n");

    // A move that fails part-way leaves the student their container on the source: here the
    // target holds a volume of the home's name that another container uses, which the move
    // cannot clear. The operation fails naming it; the container runs where it was, files and
    // host key and all, and the target keeps nothing of it.
    let target = lab.nodes.iter().find(|n| n.name == other).expect("node");
    target.lxc(&["init", "--empty", "blocker"]);
    target.lxc(&["storage", "volume", "create", "cohort", HOME]);
    target.lxc(&[
        "storage", "volume", "attach", "cohort", HOME, "blocker", "/mnt",
    ]);
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
    let failed = lab
        .cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(120))
        .await;
    assert_eq!(failed["status"], "failure", "{failed}");
    assert!(failed["error"].to_string().contains(HOME), "{failed}");
    let inst = instance(&lab).await;
    assert_eq!(inst["node"], first.as_str(), "{inst}");
    let read = login(
        &lab,
        &teacher,
        &key,
        &host_key,
        "cat ~/notes.txt /etc/cohort-test",
    )
    .await;
    assert_eq!(read, FILES, "the source's container is as it was");
    let target = lab.nodes.iter().find(|n| n.name == other).expect("node");
    assert_eq!(holdings(target), ("blocker".to_string(), HOME.to_string()));
    target.lxc(&["delete", "blocker"]);
    target.lxc(&["storage", "volume", "delete", "cohort", HOME]);
    phase("a failed move undone");

    // `cohort move mv1-s0 --target <other>`.
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
    assert_eq!(op["kind"], "move_instance", "{op}");
    lab.succeeds(&op, Duration::from_secs(120)).await;
    arrived(&lab, &teacher, &key, &host_key, &other, &first).await;
    phase("moved");

    // Evacuating the node it went to moves it back; restoring that node brings it again.
    let op = lab
        .cluster
        .admin(
            M::POST,
            &format!("/nodes/{other}/evacuate"),
            Some(to_json(&EvacuateNode {
                policy: EvacuatePolicy::Move,
            })),
        )
        .await;
    lab.succeeds(&op, Duration::from_secs(120)).await;
    arrived(&lab, &teacher, &key, &host_key, &first, &other).await;
    phase("evacuated");
    let op = lab
        .cluster
        .admin(M::POST, &format!("/nodes/{other}/restore"), None)
        .await;
    lab.succeeds(&op, Duration::from_secs(120)).await;
    arrived(&lab, &teacher, &key, &host_key, &other, &first).await;
    phase("restored");
}
