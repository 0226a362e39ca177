//! A whole deployment of real processes: a node whose LXD project has no images of its own
//! fetches the catalog image from the controller before creating; evacuating a node with policy
//! `move` takes its instance, root disk and all, to the other node and frees what it held on the
//! first.

use std::time::{Duration, Instant};

use cohort_controller::db::schema::{gpu_allocations, gpus, instances, nodes};
use cohort_e2e::bodies::{instance, limits, to_json, CreateInstance};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::TestLxd;
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy};
use diesel::prelude::*;
use reqwest::Method as M;
use serde_json::{json, Value};

fn has_image(lxd: &TestLxd, alias: &str) -> bool {
    lxd.lxc(&["image", "list", "-f", "csv", "-c", "l"])
        .lines()
        .any(|l| l.split(',').any(|a| a.trim() == alias))
}

/// `VmHWM`: the most resident memory the process has had.
fn peak_rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("process status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in kB");
    kib * 1024
}

async fn create(cluster: &Cluster, body: Value) {
    let op = cluster.admin(M::POST, "/instances", Some(body)).await;
    let done = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_without_the_image_fetches_it_before_creating() {
    let mut cluster = Cluster::start(0).await;
    cluster
        .add_node_in("node1", TestLxd::with_own_images())
        .await;
    let image = cluster.import_base_image("cohort/base").await;
    let lxd = &cluster.nodes[0].lxd;
    assert!(
        !has_image(lxd, "cohort/base"),
        "the project starts without images"
    );
    assert_eq!(image["nodes"], json!([]));

    let limits = limits(1, 512, 2);
    create(
        &cluster,
        to_json(&CreateInstance {
            limits: Some(limits),
            ..instance("fetched", "cohort/base")
        }),
    )
    .await;

    let lxd = &cluster.nodes[0].lxd;
    assert!(
        has_image(lxd, "cohort/base"),
        "the image was not fetched into the project"
    );
    // Streamed to disk and from there into LXD: the agent's peak memory stays well under the
    // tarball's size (it held the whole tarball, and a copy, before).
    let size = image["size_bytes"].as_u64().expect("image size");
    let peak = peak_rss_bytes(cluster.nodes[0].pid().expect("agent runs"));
    assert!(
        peak < size / 2,
        "the agent peaked at {peak} bytes fetching a {size}-byte image"
    );
    let fingerprint = image["fingerprint"].as_str().unwrap();
    let held = lxd.lxc(&["image", "list", "-f", "csv", "-c", "F"]);
    assert!(held.contains(fingerprint), "{held}");
    assert_eq!(
        lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "fetched,RUNNING\n"
    );
    let inst = cluster.admin(M::GET, "/instances/fetched", None).await;
    assert_eq!(inst["observed_state"], "running", "{inst}");
    let image = cluster
        .admin(M::GET, &format!("/images/{fingerprint}"), None)
        .await;
    assert_eq!(image["nodes"], json!(["node1"]), "{image}");

    let op = cluster
        .admin(M::DELETE, "/instances/fetched?force=true", None)
        .await;
    cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(120))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn evacuate_with_move_takes_the_instance_and_its_files_to_the_other_node() {
    let cluster = Cluster::start(2).await;
    cluster.import_base_image("cohort/base").await;
    let limits = limits(1, 512, 2);
    create(
        &cluster,
        to_json(&CreateInstance {
            limits: Some(limits),
            node: Some("node1".into()),
            ..instance("mover", "cohort/base")
        }),
    )
    .await;
    let (a, b) = (&cluster.nodes[0], &cluster.nodes[1]);
    assert_eq!(
        a.lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "mover,RUNNING\n"
    );
    // A file in the root disk: a container re-made from its image would not have it.
    a.lxd.lxc(&[
        "exec",
        "mover",
        "--",
        "sh",
        "-c",
        "echo kept > /root/x && sync",
    ]);

    let op = cluster
        .admin(
            M::POST,
            "/nodes/node1/evacuate",
            Some(to_json(&EvacuateNode {
                policy: EvacuatePolicy::Move,
            })),
        )
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");

    // It runs on node2 now, its file with it.
    let deadline = Instant::now() + Duration::from_secs(300);
    let inst = loop {
        let inst = cluster.admin(M::GET, "/instances/mover", None).await;
        if inst["node"] == "node2" && inst["observed_state"] == "running" {
            break inst;
        }
        assert!(Instant::now() < deadline, "never moved: {inst}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let port = inst["ssh_port"].as_u64().expect("a port on node2") as u16;
    assert!(
        (b.ssh_ports.first()..=b.ssh_ports.last()).contains(&port),
        "{inst}"
    );
    assert_eq!(
        b.lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "mover,RUNNING\n"
    );
    assert_eq!(
        b.lxd.lxc(&["exec", "mover", "--", "cat", "/root/x"]),
        "kept\n"
    );
    assert_eq!(
        a.lxd.lxc(&["list", "-f", "csv", "-c", "n"]),
        "",
        "node1 still has it"
    );

    // The row points at node2; nothing of node1's (ports, GPU slots) is held any more.
    let mut conn =
        diesel::PgConnection::establish(&cluster.db_url).expect("connect to the cluster database");
    let node1: i64 = nodes::table
        .filter(nodes::name.eq("node1"))
        .select(nodes::id)
        .first(&mut conn)
        .unwrap();
    let on_a: i64 = instances::table
        .filter(instances::node_id.eq(node1))
        .count()
        .get_result(&mut conn)
        .unwrap();
    assert_eq!(on_a, 0, "an instance row still points at node1");
    let gpu_slots_on_a: i64 = gpu_allocations::table
        .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
        .filter(gpus::node_id.eq(node1))
        .count()
        .get_result(&mut conn)
        .unwrap();
    assert_eq!(gpu_slots_on_a, 0);
    let node = cluster.admin(M::GET, "/nodes/node1", None).await;
    assert_eq!(node["state"], "evacuating", "{node}");

    let op = cluster
        .admin(M::DELETE, "/instances/mover?force=true", None)
        .await;
    cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(120))
        .await;
}
