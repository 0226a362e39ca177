//! End to end with the real binaries' parts: `cohort-controller init` and `serve` as a process,
//! a real agent (`cohort-agent join` with a join token, then `serve`) on a TestLxd project, real
//! PostgreSQL and a real ssh login. An instance is created through the API, runs, answers ssh and
//! is deleted; the controller is killed between two items of an operation and, restarted,
//! completes it exactly once.

use std::time::{Duration, Instant};

use cohort_controller::db::models::operation_item::OperationItem;
use cohort_e2e::bodies::{instance, limits, new_user, to_json, CreateInstance, Role};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::images::Image;
use cohort_proto::api::instances::{Instance, ObservedState};
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy, Node};
use cohort_proto::api::operations::{Operation, OperationStatus};
use cohort_proto::api::users::{AddSshKey, ApiTokenIssued, CreateApiToken};
use diesel::{Connection, PgConnection};

fn assert_private(state: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    for file in [
        "ca.key",
        "ca.crt",
        "server.key",
        "server.crt",
        "client.key",
        "client.crt",
    ] {
        let mode = std::fs::metadata(state.join(file))
            .expect(file)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file} is {mode:o}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enroll_create_ssh_delete_and_survive_a_controller_kill() {
    // One item at a time per node, so the kill lands between the evacuation's two items.
    let serial = [("COHORT_ITEMS_PER_NODE", "1")];
    let mut cluster = Cluster::start_with_env(0, &serial).await;
    assert_private(&cluster.controller_dir());
    let admin = cluster.admin_token.clone();
    use reqwest::Method as M;

    // The template image goes into the catalog through the API; a real agent enrolls.
    let image: Image =
        serde_json::from_value(cluster.import_base_image("cohort/base").await).expect("an image");
    cluster.add_node("node-e2e").await;

    // The poller finds it online with its capacity, and sees it holds the image.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Node = cluster.call(&admin, M::GET, "/nodes/node-e2e", None).await;
        let i: Image = cluster
            .call(
                &admin,
                M::GET,
                &format!("/images/{}", image.fingerprint),
                None,
            )
            .await;
        if n.last_heartbeat_at.is_some() && n.cores > 0 && i.nodes == ["node-e2e"] {
            break;
        }
        assert!(Instant::now() < deadline, "node never polled: {n:?} {i:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A student with a key gets an instance through the API, and logs in.
    let _: serde_json::Value = cluster
        .call(
            &admin,
            M::POST,
            "/users",
            Some(to_json(&new_user("alice", Role::Student))),
        )
        .await;
    let alice: ApiTokenIssued = cluster
        .call(
            &admin,
            M::POST,
            "/users/alice/tokens",
            Some(to_json(&CreateApiToken::default())),
        )
        .await;
    let key = SshKey::generate();
    let _: serde_json::Value = cluster
        .call(
            &alice.token,
            M::POST,
            "/me/ssh-keys",
            Some(to_json(&AddSshKey {
                public_key: key.public_key(),
            })),
        )
        .await;
    let limits = limits(1, 512, 2);
    let op: Operation = cluster
        .call(
            &alice.token,
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits.clone()),
                ..instance("e2e-alice", &image.alias)
            })),
        )
        .await;
    cluster.succeeds(&alice.token, &op).await;
    let inst: Instance = cluster
        .call(&alice.token, M::GET, "/instances/e2e-alice", None)
        .await;
    assert_eq!(inst.observed_state, ObservedState::Running, "{inst:?}");
    assert_eq!(inst.node.as_deref(), Some("node-e2e"));
    let port = inst.ssh_port.expect("ssh port");
    let node = &cluster.nodes[0];
    assert!((node.ssh_ports.first()..=node.ssh_ports.last()).contains(&port));
    assert!(node.lxd.instance_names().contains(&"e2e-alice".to_string()));
    let out = key.run_when_up(
        "127.0.0.1",
        port,
        "alice",
        "whoami",
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "ssh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "alice");

    // A second instance, then an operation with two items (evacuate: stop both). Kill the
    // controller as soon as the first item is done; the restarted one finishes the second.
    let op: Operation = cluster
        .call(
            &admin,
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits),
                owner: Some("alice".into()),
                ..instance("e2e-two", "cohort/base")
            })),
        )
        .await;
    cluster.succeeds(&admin, &op).await;
    let evac: Operation = cluster
        .call(
            &admin,
            M::POST,
            "/nodes/node-e2e/evacuate",
            Some(to_json(&EvacuateNode {
                policy: EvacuatePolicy::Stop,
            })),
        )
        .await;
    assert_eq!(evac.items.len(), 2);
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let items = OperationItem::for_operation(&mut conn, evac.id).unwrap();
        if items[0].status == OperationStatus::Success {
            assert_ne!(
                items[1].status,
                OperationStatus::Success,
                "both items finished before the kill could land"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "first item never finished: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.controller.kill();
    let before = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    cluster.restart_controller();
    let done = cluster.succeeds(&admin, &evac).await;
    assert_eq!(done.progress.done, 2);
    let after = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    assert_eq!(
        after[0].attempts, before[0].attempts,
        "the finished item ran again after the restart"
    );
    assert!(after.iter().all(|i| i.status == OperationStatus::Success));
    for name in ["e2e-alice", "e2e-two"] {
        let i: Instance = cluster
            .call(&admin, M::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(i.observed_state, ObservedState::Stopped, "{i:?}");
    }

    // Delete: the container goes from LXD and the port is free again.
    for name in ["e2e-alice", "e2e-two"] {
        let op: Operation = cluster
            .call(
                &admin,
                M::DELETE,
                &format!("/instances/{name}?force=true"),
                None,
            )
            .await;
        cluster.succeeds(&admin, &op).await;
    }
    let resp = cluster
        .request(M::GET, "/instances/e2e-alice", &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let lxd = &cluster.nodes[0].lxd;
    assert!(
        lxd.instance_names().is_empty(),
        "{:?}",
        lxd.instance_names()
    );

    // Removing the node revokes its certificate: the controller no longer talks to it.
    let _: serde_json::Value = cluster
        .call(&admin, M::POST, "/nodes/node-e2e/restore", None)
        .await;
    let resp = cluster
        .request(M::DELETE, "/nodes/node-e2e", &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let nodes: Vec<Node> = cluster.call(&admin, M::GET, "/nodes", None).await;
    assert!(nodes.is_empty());
}
