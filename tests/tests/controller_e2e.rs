//! End to end with the real binaries' parts: `cohort-controller init` and `serve` as a process,
//! a real agent (enrolled with a join token, serving in this test) on a TestLxd project, real
//! PostgreSQL and a real ssh login. An instance is created through the API, runs, answers ssh and
//! is deleted; the controller is killed between two items of an operation and, restarted,
//! completes it exactly once.

use std::time::{Duration, Instant};

use cohort_controller::models::operation_item::OperationItem;
use cohort_e2e::controller::ControllerProcess;
use cohort_e2e::fleet::{init, Api, EnrolledAgent};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestDb, TestLxd};
use cohort_proto::api::images::Image;
use cohort_proto::api::instances::{Instance, ObservedState};
use cohort_proto::api::nodes::Node;
use cohort_proto::api::operations::{Operation, OperationStatus};
use cohort_proto::api::users::ApiTokenIssued;
use serde_json::json;

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
    let db = TestDb::new();
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let state = tempfile::tempdir().expect("controller state");
    let (controller_port, agent_port) = (ports.port(0), ports.port(1));
    let ssh_ports = (ports.port(2), ports.port(20));

    let admin = init(db.url(), state.path());
    assert_private(state.path());
    // One item at a time per node, so the kill lands between the evacuation's two items.
    let serial = [("COHORT_ITEMS_PER_NODE", "1")];
    let mut controller = ControllerProcess::start(db.url(), state.path(), controller_port, &serial);
    let api = Api::new(state.path(), controller_port);
    use reqwest::Method as M;

    // The template image goes into the catalog through the API; a real agent enrolls.
    let image = api.import_base_image(&admin, "cohort/base").await;
    let agent_addr = format!("127.0.0.1:{agent_port}").parse().unwrap();
    let agent = EnrolledAgent::enroll(&api, &admin, "node-e2e", &lxd, agent_addr, ssh_ports).await;

    // The poller finds it online with its capacity, and sees it holds the image.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Node = api.call(&admin, M::GET, "/nodes/node-e2e", None).await;
        let i: Image = api
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
    let _: serde_json::Value = api
        .call(
            &admin,
            M::POST,
            "/users",
            Some(json!({"username": "alice", "role": "student"})),
        )
        .await;
    let alice: ApiTokenIssued = api
        .call(&admin, M::POST, "/users/alice/tokens", Some(json!({})))
        .await;
    let key = SshKey::generate();
    let _: serde_json::Value = api
        .call(
            &alice.token,
            M::POST,
            "/me/ssh-keys",
            Some(json!({"public_key": key.public_key()})),
        )
        .await;
    let limits = json!({"cpu": 1, "memory_mib": 512, "disk_gib": 2});
    let op: Operation = api
        .call(
            &alice.token,
            M::POST,
            "/instances",
            Some(json!({"name": "e2e-alice", "image": image.alias, "limits": limits})),
        )
        .await;
    api.wait(&alice.token, &op).await;
    let inst: Instance = api
        .call(&alice.token, M::GET, "/instances/e2e-alice", None)
        .await;
    assert_eq!(inst.observed_state, ObservedState::Running, "{inst:?}");
    assert_eq!(inst.node.as_deref(), Some("node-e2e"));
    let port = inst.ssh_port.expect("ssh port");
    assert!((ssh_ports.0..=ssh_ports.1).contains(&port));
    assert!(lxd.instance_names().contains(&"e2e-alice".to_string()));
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
    let op: Operation = api
        .call(
            &admin,
            M::POST,
            "/instances",
            Some(json!({"name": "e2e-two", "image": "cohort/base", "limits": limits, "owner": "alice"})),
        )
        .await;
    api.wait(&admin, &op).await;
    let evac: Operation = api
        .call(
            &admin,
            M::POST,
            "/nodes/node-e2e/evacuate",
            Some(json!({"policy": "stop"})),
        )
        .await;
    assert_eq!(evac.items.len(), 2);
    let mut conn = db.connect();
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
    controller.kill();
    let before = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    controller = ControllerProcess::start(db.url(), state.path(), controller_port, &serial);
    let done = api.wait(&admin, &evac).await;
    assert_eq!(done.progress.done, 2);
    let after = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    assert_eq!(
        after[0].attempts, before[0].attempts,
        "the finished item ran again after the restart"
    );
    assert!(after.iter().all(|i| i.status == OperationStatus::Success));
    for name in ["e2e-alice", "e2e-two"] {
        let i: Instance = api
            .call(&admin, M::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(i.observed_state, ObservedState::Stopped, "{i:?}");
    }

    // Delete: the container goes from LXD and the port is free again.
    for name in ["e2e-alice", "e2e-two"] {
        let op: Operation = api
            .call(
                &admin,
                M::DELETE,
                &format!("/instances/{name}?force=true"),
                None,
            )
            .await;
        api.wait(&admin, &op).await;
    }
    let resp = api
        .client
        .get(format!("{}/instances/e2e-alice", api.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(
        lxd.instance_names().is_empty(),
        "{:?}",
        lxd.instance_names()
    );

    // Removing the node revokes its certificate: the controller no longer talks to it.
    let _: serde_json::Value = api
        .call(&admin, M::POST, "/nodes/node-e2e/restore", None)
        .await;
    let resp = api
        .client
        .delete(format!("{}/nodes/node-e2e", api.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let nodes: Vec<Node> = api.call(&admin, M::GET, "/nodes", None).await;
    assert!(nodes.is_empty());
    drop(controller);
    drop(agent);
}
