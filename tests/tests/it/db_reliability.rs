//! Issue 42, the database's own faults: a crashed peer's transaction (idle, holding a row lock)
//! blocks the controller only for the lock timeout and is ended by the idle-in-transaction
//! timeout (defect 8); old audit rows and finished operations are pruned, recent ones kept, and
//! the foreign keys deleted on hot paths have indexes (defect 14); a big teardown while the
//! poller runs meets no deadlock and takes no node offline (defect 5); and a poll whose listing
//! is older than a create that just finished repairs nothing (defect 4).

use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_controller::app::state::Controller;
use cohort_controller::db::models::node::Node;
use cohort_e2e::bodies::{instance, limits, to_json, CreateInstance};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::controller::TestController;
use cohort_proto::api::nodes::NodeState;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Text};
use reqwest::Method;
use serde_json::Value;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn count(conn: &mut PgConnection, sql: &str) -> i64 {
    diesel::sql_query(sql)
        .get_result::<Count>(conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .n
}

/// A controller on `t`'s database whose sessions wait 1 s for a lock and are ended 2 s idle in
/// a transaction.
fn short_limits(t: &TestController) -> Arc<Controller> {
    t.another_configured("limits", |config| {
        config.database.lock_timeout_ms = 1000;
        config.database.idle_in_transaction_timeout_ms = 2000;
        config.database.retries = 1;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_peers_lock_holds_the_controller_back_only_briefly() {
    let t = TestController::new();
    let node = t.node("peer-locked", (20000, 20100), 8, 16, false);
    let ctl = short_limits(&t);
    // A peer controller with the same limits that "crashed" inside a transaction: it took the
    // node's row lock and then went silent (its process hung, its host gone).
    let peer_pool = cohort_controller::db::pool_with(t.db.url(), 1, &ctl.config.database.session())
        .expect("peer pool");
    let mut peer = peer_pool.get().expect("peer connection");
    #[derive(QueryableByName)]
    struct Pid {
        #[diesel(sql_type = Integer)]
        pid: i32,
    }
    let pid = diesel::sql_query("SELECT pg_backend_pid() AS pid")
        .get_result::<Pid>(&mut *peer)
        .expect("peer pid")
        .pid;
    peer.batch_execute(&format!(
        "BEGIN; SELECT 1 FROM nodes WHERE id = {} FOR UPDATE",
        node.id
    ))
    .expect("peer takes the lock");

    // The controller's write to that row fails within the lock timeout, with words for a 503.
    let started = Instant::now();
    let id = node.id;
    let blocked = tokio::time::timeout(
        Duration::from_secs(8),
        ctl.db(move |conn| Ok(Node::set_state(conn, id, NodeState::Cordoned)?)),
    )
    .await
    .expect("the controller's call waited on the crashed peer's lock past 8 s");
    let err = blocked.expect_err("the row was locked");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "failed only after {:?}",
        started.elapsed()
    );
    let why = err.database_unavailable().unwrap_or_else(|| {
        panic!("a lock timeout is a 503 with words, not a bare internal error: {err}")
    });
    assert!(why.contains("locked"), "{why}");

    // The server ends the peer's session by its idle-in-transaction timeout; its lock is gone.
    let mut conn = t.conn();
    let deadline = Instant::now() + Duration::from_secs(10);
    while count(
        &mut conn,
        &format!("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = {pid}"),
    ) > 0
    {
        assert!(
            Instant::now() < deadline,
            "the crashed peer's session (pid {pid}) still lives"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    ctl.db(move |conn| Ok(Node::set_state(conn, id, NodeState::Cordoned)?))
        .await
        .expect("the row is free again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_audit_rows_and_finished_operations_are_pruned_recent_ones_kept() {
    let t = TestController::new();
    let mut conn = t.conn();
    conn.batch_execute(
        "INSERT INTO audit_log (actor, action, object_kind, object, created_at) VALUES \
           ('t', 'x', 'instance', 'old', now() - interval '400 days'), \
           ('t', 'x', 'instance', 'old', now() - interval '366 days'), \
           ('t', 'x', 'instance', 'recent', now() - interval '300 days'), \
           ('t', 'x', 'instance', 'recent', now()); \
         INSERT INTO operations (id, kind, status, target, finished_at) VALUES \
           ('00000000-0000-0000-0000-000000000001', 'create_instance', 'success', 'old', \
            now() - interval '91 days'), \
           ('00000000-0000-0000-0000-000000000002', 'create_instance', 'failure', 'old', \
            now() - interval '200 days'), \
           ('00000000-0000-0000-0000-000000000003', 'create_instance', 'success', 'recent', \
            now() - interval '89 days'), \
           ('00000000-0000-0000-0000-000000000004', 'create_instance', 'running', 'unfinished', \
            NULL); \
         UPDATE operations SET created_at = now() - interval '300 days'; \
         INSERT INTO operation_items (id, operation_id, position, action, target, status) VALUES \
           ('00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-000000000001', 0, \
            'create', 'old', 'success'), \
           ('00000000-0000-0000-0000-0000000000a3', '00000000-0000-0000-0000-000000000003', 0, \
            'create', 'recent', 'success'), \
           ('00000000-0000-0000-0000-0000000000a4', '00000000-0000-0000-0000-000000000004', 0, \
            'create', 'unfinished', 'running');",
    )
    .expect("old and recent rows");

    let pruned = cohort_controller::app::prune::prune_once(&t.ctl)
        .await
        .expect("prune");
    assert_eq!((pruned.audit_rows, pruned.operations), (2, 2));
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM audit_log WHERE object = 'recent'"
        ),
        2
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM audit_log WHERE object = 'old'"
        ),
        0
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM operations WHERE target IN ('recent', 'unfinished')"
        ),
        2
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM operations WHERE target = 'old'"
        ),
        0
    );
    assert_eq!(
        count(&mut conn, "SELECT count(*) AS n FROM operation_items"),
        2,
        "the pruned operations' items go with them"
    );
    // A second pass finds nothing more.
    let again = cohort_controller::app::prune::prune_once(&t.ctl)
        .await
        .expect("prune again");
    assert_eq!((again.audit_rows, again.operations), (0, 0));
}

#[test]
fn foreign_keys_deleted_on_hot_paths_have_indexes() {
    let t = TestController::new();
    let mut conn = t.conn();
    for (table, column) in [
        ("operation_items", "instance_id"),
        ("node_images", "image_id"),
        ("instances", "image_id"),
        ("operations", "created_by"),
        ("enrollments", "user_id"),
        ("operations", "finished_at"),
    ] {
        let n = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_index i \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0] \
             WHERE i.indrelid = $1::regclass AND a.attname = $2",
        )
        .bind::<Text, _>(table)
        .bind::<Text, _>(column)
        .get_result::<Count>(&mut conn)
        .expect("indexes")
        .n;
        assert!(n > 0, "no index leads with {table}.{column}");
    }
}

/// Database-wide deadlocks PostgreSQL has counted in `db` (its statistics flushed first).
fn deadlocks(conn: &mut PgConnection) -> i64 {
    conn.batch_execute("SELECT pg_stat_clear_snapshot()")
        .expect("clear snapshot");
    count(
        conn,
        "SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()",
    )
}

/// A teardown of 240 instances on a polled node: the real poller (every second, a node offline
/// after 3 s silent) records the node and its instances while 6 connections delete them, one
/// row per transaction as an instance's delete does (the row, then its node's counters by the
/// usage trigger), and 2 more a dozen at a time in id order as a course's teardown does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_big_teardown_while_polling_meets_no_deadlock_and_takes_no_node_offline() {
    let env = [
        ("COHORT_OFFLINE_AFTER_S", "3"),
        ("COHORT_STARTUP_GRACE_S", "0"),
        ("COHORT_POLL_INTERVAL_S", "1"),
    ];
    let cluster = Cluster::start_with_env(1, &env).await;
    cluster.import_base_image("cohort/base").await;
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    // Rows of instances whose containers are gone (as after a restore): every poll records each
    // of them (missing), so a poll holds many instance rows.
    conn.batch_execute(
        "INSERT INTO instances (name, owner_id, image_id, node_id, ssh_port, observed_state, \
                                cpu, memory_mib, disk_gib) \
         SELECT 'teardown-' || g, (SELECT min(id) FROM users), (SELECT min(id) FROM images), \
                n.id, n.ssh_port_first + g, 'running', 1, 64, 1 \
         FROM generate_series(1, 240) g, nodes n WHERE n.name = 'node1'",
    )
    .expect("instances");
    // Let a few polls run over them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = deadlocks(&mut conn);

    let ids: Vec<i64> = instances_left(&mut conn);
    assert_eq!(ids.len(), 240);
    let url = cluster.db_url.clone();
    let mut deleters = Vec::new();
    for lane in 0..8usize {
        let url = url.clone();
        let mine: Vec<i64> = ids.iter().copied().skip(lane).step_by(8).collect();
        deleters.push(std::thread::spawn(move || -> Vec<String> {
            let mut conn = PgConnection::establish(&url).expect("connect");
            let mut errors = Vec::new();
            let chunk = if lane < 6 { 1 } else { 12 };
            for ids in mine.chunks(chunk) {
                let list = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
                let done = conn.transaction(|conn| {
                    diesel::sql_query(format!(
                        "SELECT id FROM instances WHERE id IN ({list}) ORDER BY id FOR UPDATE"
                    ))
                    .execute(conn)?;
                    std::thread::sleep(Duration::from_millis(5));
                    diesel::sql_query(format!("DELETE FROM instances WHERE id IN ({list})"))
                        .execute(conn)
                });
                if let Err(e) = done {
                    errors.push(e.to_string());
                }
            }
            errors
        }));
    }
    let errors: Vec<String> = deleters
        .into_iter()
        .flat_map(|d| d.join().expect("deleter"))
        .collect();
    assert!(errors.is_empty(), "the teardown met errors: {errors:?}");
    assert!(instances_left(&mut conn).is_empty());
    // Two more polls, then the node is still online and heard from within the threshold.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let node = cluster.admin(Method::GET, "/nodes/node1", None).await;
    assert_eq!(node["state"], "online", "{node}");
    let after = deadlocks(&mut conn);
    assert_eq!(
        after - before,
        0,
        "PostgreSQL found deadlocks during the teardown\n{}",
        cluster.controller_log()
    );
}

fn instances_left(conn: &mut PgConnection) -> Vec<i64> {
    #[derive(QueryableByName)]
    struct Id {
        #[diesel(sql_type = BigInt)]
        id: i64,
    }
    diesel::sql_query("SELECT id FROM instances WHERE name LIKE 'teardown-%' ORDER BY id")
        .load::<Id>(conn)
        .expect("instances")
        .into_iter()
        .map(|i| i.id)
        .collect()
}

/// When the node was last heard from, as the API shows it.
async fn heartbeat(cluster: &Cluster) -> Value {
    cluster.admin(Method::GET, "/nodes/node1", None).await["last_heartbeat_at"].clone()
}

/// Waits until the node's heartbeat is no longer `was` (a poll recorded); the new one.
async fn next_heartbeat(cluster: &Cluster, was: &Value) -> Value {
    let deadline = Instant::now() + Duration::from_secs(PAUSE_S + 15);
    loop {
        let now = heartbeat(cluster).await;
        if &now != was {
            return now;
        }
        assert!(Instant::now() < deadline, "no poll recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The test hook's pause between a poll's listing and its record.
const PAUSE_S: u64 = 25;

/// Defect 4: with `repair`, a poll whose listing was taken before a create finished must not
/// take the new container for missing: no repair, and the instance keeps its node and port.
/// The hook `COHORT_POLL_PAUSE_AFTER_LISTING_MS` holds every poll 25 s between its listing and
/// its record (polls of a node never overlap, so they run back to back); the create starts just
/// after a listing (a record moves the heartbeat, the next listing follows within the 1 s
/// interval) and ends before that poll records.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_create_finishing_after_the_listing_is_not_repaired() {
    let pause = (PAUSE_S * 1000).to_string();
    let env = [
        ("COHORT_DRIFT_POLICY", "repair"),
        ("COHORT_POLL_INTERVAL_S", "1"),
        ("COHORT_POLL_PAUSE_AFTER_LISTING_MS", pause.as_str()),
        ("COHORT_OFFLINE_AFTER_S", "120"),
    ];
    let cluster = Cluster::start_with_env(1, &env).await;
    cluster.import_base_image("cohort/base").await;
    let was = heartbeat(&cluster).await;
    let recorded = next_heartbeat(&cluster, &was).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let op = cluster
        .admin(
            Method::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits(1, 256, 2)),
                start: true,
                ..instance("fresh-1", "cohort/base")
            })),
        )
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(
        heartbeat(&cluster).await,
        recorded,
        "the create outlasted the poll's pause: the test needs a longer PAUSE_S"
    );
    let made = cluster.admin(Method::GET, "/instances/fresh-1", None).await;
    let port = made["ssh_port"].as_u64().expect("a port");
    // The stale poll records; a repair it would enqueue runs at once (its create meets 409).
    next_heartbeat(&cluster, &recorded).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let now: Value = cluster.admin(Method::GET, "/instances/fresh-1", None).await;
    assert_eq!(now["ssh_port"].as_u64(), Some(port), "{now}");
    assert_eq!(now["node"], "node1", "{now}");
    assert_eq!(now["observed_state"], "running", "{now}");
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM operations WHERE payload->>'repair' IS NOT NULL"
        ),
        0,
        "a repair was enqueued\n{}",
        cluster.controller_log()
    );
    assert_eq!(
        count(
            &mut conn,
            "SELECT count(*) AS n FROM audit_log WHERE actor = 'poller' AND object = 'fresh-1'"
        ),
        0,
        "a poll judged the new container by a listing older than its create"
    );
}
