//! Issue 24: containers in a node's LXD project that Cohort has no row for (here: rows removed
//! from the database, as a restore from an older backup would) are reported as drift `orphan`,
//! listed for admins, their SSH ports never handed out again, and an admin adopts one (it
//! becomes an instance again, on its port) or deletes one (gone from LXD).

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{instance, limits, to_json, AdoptOrphan, CreateInstance};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::users::AddSshKey;
use cohort_proto::ErrorBody;
use diesel::prelude::*;
use reqwest::Method;
use serde_json::{json, Value};

/// An instance of `prof` (who has an SSH key, so it gets its SSH proxy device); its port.
async fn created(cluster: &Cluster, name: &str) -> u64 {
    let op = cluster
        .admin(
            Method::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits(1, 256, 2)),
                owner: Some("prof".into()),
                start: false,
                ..instance(name, "cohort/base")
            })),
        )
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let inst = cluster
        .admin(Method::GET, &format!("/instances/{name}"), None)
        .await;
    inst["ssh_port"].as_u64().expect("a port")
}

/// What a database restored from before `name` was made holds: no row for it.
fn forget(cluster: &Cluster, name: &str) {
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    // The running controller's poller writes the same rows in the one lock order (see
    // `cohort_controller::db`): this delete never deadlocks with it.
    let gone = diesel::sql_query("DELETE FROM instances WHERE name = $1")
        .bind::<diesel::sql_types::Text, _>(name)
        .execute(&mut conn)
        .unwrap_or_else(|e| panic!("forget {name}: {e}"));
    assert_eq!(gone, 1);
}

fn orphan_drift_rows(cluster: &Cluster, name: &str) -> i64 {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    diesel::sql_query(
        "SELECT count(*) AS n FROM audit_log WHERE actor = 'poller' AND action = 'drift' \
         AND object = $1 AND detail->>'found' = 'orphan'",
    )
    .bind::<diesel::sql_types::Text, _>(name)
    .get_result::<Count>(&mut conn)
    .expect("audit")
    .n
}

/// Waits until the orphans list holds exactly `names`; returns it.
async fn until_orphans(cluster: &Cluster, names: &[&str]) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = cluster.admin(Method::GET, "/orphans", None).await;
        let listed: Vec<&str> = list
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(|o| o["name"].as_str())
            .collect();
        if listed == names {
            return list;
        }
        assert!(
            Instant::now() < deadline,
            "orphans {listed:?}, not {names:?}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn containers_without_a_record_are_reported_keep_their_ports_and_are_adopted_or_deleted() {
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    let key = SshKey::generate();
    let res = cluster
        .request(Method::POST, "/me/ssh-keys", &prof)
        .json(&AddSshKey {
            public_key: key.public_key(),
        })
        .send()
        .await
        .expect("add key");
    assert!(
        res.status().is_success(),
        "{}",
        res.text().await.unwrap_or_default()
    );
    let lost_port = created(&cluster, "lost-1").await;
    forget(&cluster, "lost-1");

    // Reported once seen on two polls, with its port; a student may not look.
    let list = until_orphans(&cluster, &["lost-1"]).await;
    assert_eq!(list[0]["node"], "node1");
    assert_eq!(list[0]["status"], "stopped");
    assert_eq!(list[0]["ssh_port"], lost_port);
    let deadline = Instant::now() + Duration::from_secs(30);
    while orphan_drift_rows(&cluster, "lost-1") == 0 {
        assert!(Instant::now() < deadline, "never reported as drift");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(orphan_drift_rows(&cluster, "lost-1"), 1, "reported once");
    let denied = cluster
        .request(Method::GET, "/orphans", &prof)
        .send()
        .await
        .expect("answer");
    assert_eq!(denied.status(), 403);

    // Its port (the lowest of the range, free in the database) is not handed out again.
    let next_port = created(&cluster, "next-1").await;
    assert_ne!(
        next_port, lost_port,
        "an orphan's port was handed out again"
    );

    // Adopted: an instance again, on its port; no longer an orphan.
    let bad = cluster
        .request(
            Method::POST,
            "/orphans/node1/lost-1/adopt",
            &cluster.admin_token,
        )
        .json(&json!({"owner": "nobody", "image": "cohort/base"}))
        .send()
        .await
        .expect("answer");
    assert_eq!(bad.status(), 400);
    let bad: Value = bad.json().await.expect("error");
    assert_eq!(bad["error"]["field"], "owner");
    cluster
        .admin(
            Method::POST,
            "/orphans/node1/lost-1/adopt",
            Some(to_json(&AdoptOrphan {
                owner: "prof".into(),
                image: "cohort/base".into(),
            })),
        )
        .await;
    let adopted = cluster.admin(Method::GET, "/instances/lost-1", None).await;
    assert_eq!(adopted["owner"], "prof", "{adopted}");
    assert_eq!(adopted["ssh_port"], lost_port, "{adopted}");
    assert_eq!(adopted["node"], "node1", "{adopted}");
    until_orphans(&cluster, &[]).await;

    // Deleted: gone from LXD, and no longer listed.
    forget(&cluster, "next-1");
    until_orphans(&cluster, &["next-1"]).await;
    let res = cluster
        .request(
            Method::DELETE,
            "/orphans/node1/next-1",
            &cluster.admin_token,
        )
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status(), 204);
    assert!(!cluster.nodes[0]
        .lxd
        .instance_names()
        .contains(&"next-1".to_string()));
    until_orphans(&cluster, &[]).await;
    let audited = cluster
        .admin(Method::GET, "/audit?object=next-1", None)
        .await;
    assert!(
        audited["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["action"] == "delete_orphan")),
        "{audited}"
    );
    let op = cluster
        .admin(Method::DELETE, "/instances/lost-1?force=true", None)
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
}

/// Deleting an orphan answers with its outcome: the node's refusal is a 502 carrying the
/// daemon's reason, and the orphan stays listed; a node that does not answer within the request's
/// wait is a 504 naming the operation, which goes on and deletes the container once the node is
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_orphan_delete_refused_is_502_and_one_waiting_for_its_node_is_504() {
    let mut cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    cluster.user("prof", "instructor").await;
    created(&cluster, "kept-1").await;
    forget(&cluster, "kept-1");
    until_orphans(&cluster, &["kept-1"]).await;

    // The daemon refuses: deletion protection, set by an admin with `lxc`.
    let lxd = &cluster.nodes[0].lxd;
    lxd.lxc(&["config", "set", "kept-1", "security.protection.delete=true"]);
    let res = cluster
        .request(
            Method::DELETE,
            "/orphans/node1/kept-1",
            &cluster.admin_token,
        )
        .send()
        .await
        .expect("answer");
    let status = res.status();
    let body: ErrorBody = res.json().await.expect("a JSON error");
    assert_eq!(status, 502, "{body:?}");
    assert_eq!(body.error.code, "agent_error", "{body:?}");
    let reason = body.error.message.to_lowercase();
    assert!(
        reason.contains("kept-1") && reason.contains("protect"),
        "the daemon's reason: {body:?}"
    );
    until_orphans(&cluster, &["kept-1"]).await;
    assert!(lxd.instance_names().contains(&"kept-1".to_string()));

    // The node does not answer: 504 naming the operation, which finishes once it is back.
    cluster.nodes[0]
        .lxd
        .lxc(&["config", "unset", "kept-1", "security.protection.delete"]);
    cluster.nodes[0].kill();
    let res = cluster
        .request(
            Method::DELETE,
            "/orphans/node1/kept-1",
            &cluster.admin_token,
        )
        .send()
        .await
        .expect("answer");
    let status = res.status();
    let body: ErrorBody = res.json().await.expect("a JSON error");
    assert_eq!(status, 504, "{body:?}");
    let op_id = body
        .error
        .message
        .split_whitespace()
        .skip_while(|w| *w != "operation")
        .nth(1)
        .unwrap_or_else(|| panic!("the message names the operation: {body:?}"))
        .to_string();
    cluster.nodes[0].restart();
    let done = cluster
        .wait_operation(&op_id, Duration::from_secs(180))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert!(!cluster.nodes[0]
        .lxd
        .instance_names()
        .contains(&"kept-1".to_string()));
    until_orphans(&cluster, &[]).await;
}
