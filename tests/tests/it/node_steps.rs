//! Issue 41: node changes a request asks for are steps of durable operations, not pushes made
//! inline and forgotten when they fail. With the course's node's agent down, a course's new
//! network policy and a student's new SSH key each leave an operation that is still under way,
//! its item showing why (the agent cannot be reached); once the agent is back, both operations
//! succeed and the policy is on the container.

use std::time::Duration;

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_proto::api::courses::{Egress, NetworkPolicy};
use cohort_proto::api::users::AddSshKey;
use reqwest::Method;
use serde_json::Value;

/// The operation of `kind` that `token`'s owner sees; panics when there is none.
async fn operation_of(cluster: &Cluster, token: &str, kind: &str) -> Value {
    let ops: Value = cluster.call(token, Method::GET, "/operations", None).await;
    ops.as_array()
        .expect("operations")
        .iter()
        .find(|op| op["kind"] == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} operation in {ops:#}"))
}

/// The operation is not final, and its one item says why it waits.
fn pending_with_reason(op: &Value) {
    let status = op["status"].as_str().unwrap_or_default();
    assert!(
        !["success", "failure", "cancelled"].contains(&status),
        "{op:#}"
    );
    let items = op["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{op:#}");
    let why = items[0]["error"].as_str().unwrap_or_default();
    assert!(why.contains("unreachable"), "{op:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_made_while_an_agent_is_down_are_applied_when_it_is_back() {
    let mut cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    cluster
        .create_course(
            &prof,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                home_mib: Some(64),
                ..course("net1", "Steps", "cohort/base")
            },
        )
        .await;
    cluster
        .import_roster(
            &prof,
            "net1",
            "username,name,email,ssh_key\nalice,Alice,,\n".into(),
        )
        .await;
    let provision = cluster.start_provision("net1", &prof).await;
    let done = cluster
        .wait_operation(&provision, Duration::from_secs(600))
        .await;
    assert_eq!(
        done["status"],
        "success",
        "{done}\n{}",
        cluster.controller_log()
    );
    let alice = cluster.token_for("alice").await;

    cluster.nodes[0].kill();

    // The policy is stored and answered as before; its push to the container is an operation
    // still waiting for the agent, not a warning in the controller's log.
    let course: Value = cluster
        .call(
            &prof,
            Method::PUT,
            "/courses/net1/network",
            Some(to_json(&NetworkPolicy {
                egress: Egress::None,
                ssh_from: vec![],
            })),
        )
        .await;
    assert_eq!(course["code"], "net1", "{course}");
    let network = operation_of(&cluster, &prof, "set_course_network").await;
    pending_with_reason(&network);

    // So is a new key's.
    let key = cohort_e2e::ssh::SshKey::generate();
    let res = cluster
        .request(Method::POST, "/me/ssh-keys", &alice)
        .json(&AddSshKey {
            public_key: key.public_key(),
        })
        .send()
        .await
        .expect("add key");
    assert_eq!(res.status(), 201);
    let logins = operation_of(&cluster, &alice, "apply_logins").await;
    pending_with_reason(&logins);

    cluster.nodes[0].restart();
    for (token, op) in [(&prof, &network), (&alice, &logins)] {
        let id = op["id"].as_str().expect("id");
        let done = cluster
            .wait_operation_as(token, id, Duration::from_secs(300))
            .await;
        assert_eq!(
            done["status"],
            "success",
            "{done:#}\n{}",
            cluster.controller_log()
        );
    }
    let stored =
        cluster.nodes[0]
            .lxd
            .lxc(&["config", "get", "net1-alice", "user.cohort.network_policy"]);
    assert!(stored.contains("none"), "{stored}");
}
