//! The node poller with a real agent: a node silent past the offline threshold goes `offline`
//! and its instances `unknown`; nothing is placed there; when it answers again it is back
//! `online` and its instances reconciled; a controller restart marks no healthy node offline.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{instance, limits, to_json, CreateInstance};
use cohort_e2e::cluster::Cluster;
use cohort_proto::api::instances::{Instance, ObservedState};
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy, Node, NodeState};
use cohort_proto::api::operations::Operation;
use diesel::{Connection, PgConnection};
use reqwest::Method as M;

async fn until<T>(what: &str, within: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn node(cluster: &Cluster, admin: &str) -> Node {
    cluster.call(admin, M::GET, "/nodes/node-p", None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_nodes_go_offline_come_back_and_restarts_take_none_down() {
    let env = [
        ("COHORT_OFFLINE_AFTER_S", "3"),
        ("COHORT_STARTUP_GRACE_S", "10"),
    ];
    let mut cluster = Cluster::start_with_env(0, &env).await;
    let admin = cluster.admin_token.clone();
    cluster.import_base_image("cohort/base").await;
    cluster.add_node("node-p").await;
    until("first poll", Duration::from_secs(30), async || {
        node(&cluster, &admin).await.last_heartbeat_at.map(|_| ())
    })
    .await;

    let limits = limits(1, 256, 1);
    let op: Operation = cluster
        .call(
            &admin,
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits.clone()),
                start: false,
                ..instance("poll-1", "cohort/base")
            })),
        )
        .await;
    cluster.succeeds(&admin, &op).await;

    // Past the grace period, a silent agent takes its node offline and its instance to unknown.
    tokio::time::sleep(Duration::from_secs(10)).await;
    cluster.nodes[0].kill();
    until("offline", Duration::from_secs(30), async || {
        (node(&cluster, &admin).await.state == NodeState::Offline).then_some(())
    })
    .await;
    let inst: Instance = cluster
        .call(&admin, M::GET, "/instances/poll-1", None)
        .await;
    assert_eq!(
        inst.observed_state,
        ObservedState::Unknown,
        "never silently stopped"
    );
    let refused = cluster
        .request(M::POST, "/instances", &admin)
        .json(&CreateInstance {
            limits: Some(limits),
            queue: false,
            ..instance("poll-2", "cohort/base")
        })
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 409, "an offline node took a placement");

    // It answers again: online, and the instance reconciled from LXD.
    cluster.nodes[0].restart();
    until("online", Duration::from_secs(30), async || {
        (node(&cluster, &admin).await.state == NodeState::Online).then_some(())
    })
    .await;
    until("reconciled", Duration::from_secs(30), async || {
        let i: Instance = cluster
            .call(&admin, M::GET, "/instances/poll-1", None)
            .await;
        (i.observed_state == ObservedState::Stopped).then_some(())
    })
    .await;

    // A controller restart, the agent healthy and its last poll older than the threshold: the
    // grace period keeps the node online.
    cluster.controller.kill();
    tokio::time::sleep(Duration::from_secs(5)).await;
    cluster.restart_controller();
    let watch_until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < watch_until {
        assert_eq!(
            node(&cluster, &admin).await.state,
            NodeState::Online,
            "a restart took a healthy node offline"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let op: Operation = cluster
        .call(&admin, M::DELETE, "/instances/poll-1", None)
        .await;
    cluster.succeeds(&admin, &op).await;
}

/// Kills the cluster's one node `name` and waits until it has gone offline, starts it and waits
/// until it has answered again (a heartbeat after the outage); returns the state it came back in.
async fn outage(cluster: &mut Cluster, admin: &str, name: &str) -> NodeState {
    let path = format!("/nodes/{name}");
    cluster.nodes[0].kill();
    until("offline", Duration::from_secs(30), async || {
        let n: Node = cluster.call(admin, M::GET, &path, None).await;
        (n.state == NodeState::Offline).then_some(())
    })
    .await;
    let gone = chrono::Utc::now();
    cluster.nodes[0].restart();
    let back: Node = until("answering again", Duration::from_secs(30), async || {
        let n: Node = cluster.call(admin, M::GET, &path, None).await;
        n.last_heartbeat_at
            .filter(|at| *at > gone && n.state != NodeState::Offline)
            .map(|_| n)
    })
    .await;
    // And it stays so over several polls.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let later: Node = cluster.call(admin, M::GET, &path, None).await;
    assert_eq!(
        later.state, back.state,
        "{name} changed state after it came back"
    );
    back.state
}

/// Issue 24: a cordoned or evacuating node that goes offline comes back cordoned or
/// evacuating, not `online`, and takes no placement until an admin restores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cordon_and_evacuation_outlive_an_outage() {
    let env = [
        ("COHORT_OFFLINE_AFTER_S", "3"),
        ("COHORT_STARTUP_GRACE_S", "0"),
    ];
    let mut cluster = Cluster::start_with_env(0, &env).await;
    let admin = cluster.admin_token.clone();
    // A catalog row is all placement needs to consider the node.
    cohort_controller::db::models::image::Image::insert(
        &mut PgConnection::establish(&cluster.db_url).expect("connect"),
        &cohort_controller::db::models::image::NewImage {
            fingerprint: &"a".repeat(64),
            alias: "base",
            description: "",
            gpu_ready: false,
            size_bytes: 1,
            created_by: None,
        },
    )
    .unwrap();
    cluster.add_node("node-c").await;
    until("first poll", Duration::from_secs(30), async || {
        let n: Node = cluster.call(&admin, M::GET, "/nodes/node-c", None).await;
        n.last_heartbeat_at.map(|_| ())
    })
    .await;

    let _: Node = cluster
        .call(&admin, M::POST, "/nodes/node-c/cordon", None)
        .await;
    let back = outage(&mut cluster, &admin, "node-c").await;
    assert_eq!(
        back,
        NodeState::Cordoned,
        "the cordon was lost in the outage"
    );
    assert_eq!(
        place(&cluster, &admin).await,
        409,
        "a cordoned node took a placement"
    );

    let op: Operation = cluster
        .call(
            &admin,
            M::POST,
            "/nodes/node-c/evacuate",
            Some(to_json(&EvacuateNode {
                policy: EvacuatePolicy::Stop,
            })),
        )
        .await;
    cluster.succeeds(&admin, &op).await;
    let back = outage(&mut cluster, &admin, "node-c").await;
    assert_eq!(
        back,
        NodeState::Evacuating,
        "the evacuation was lost in the outage"
    );
    assert_eq!(
        place(&cluster, &admin).await,
        409,
        "an evacuated node took a placement"
    );

    // A restore while the node is away is what it comes back to.
    cluster.nodes[0].kill();
    until("offline", Duration::from_secs(30), async || {
        (node_named(&cluster, &admin, "node-c").await.state == NodeState::Offline).then_some(())
    })
    .await;
    let op: Operation = cluster
        .call(&admin, M::POST, "/nodes/node-c/restore", None)
        .await;
    cluster.succeeds(&admin, &op).await;
    assert_eq!(
        node_named(&cluster, &admin, "node-c").await.state,
        NodeState::Offline,
        "a restore does not make an unreachable node online"
    );
    cluster.nodes[0].restart();
    until("online", Duration::from_secs(30), async || {
        (node_named(&cluster, &admin, "node-c").await.state == NodeState::Online).then_some(())
    })
    .await;
    assert_eq!(
        place(&cluster, &admin).await,
        202,
        "a restored node takes placements again"
    );
}

/// Asks for an instance on the catalog row `base`, never queued: the answer's status.
async fn place(cluster: &Cluster, admin: &str) -> reqwest::StatusCode {
    cluster
        .request(M::POST, "/instances", admin)
        .json(&CreateInstance {
            limits: Some(limits(1, 256, 1)),
            queue: false,
            start: false,
            ..instance("cordon-1", "base")
        })
        .send()
        .await
        .unwrap()
        .status()
}

async fn node_named(cluster: &Cluster, admin: &str, name: &str) -> Node {
    cluster
        .call(admin, M::GET, &format!("/nodes/{name}"), None)
        .await
}
