//! Issue 42, defect 7: one clock. A controller whose host clock runs ten minutes ahead (the real
//! binary under libfaketime) shares a database with others: it must not take a lease another
//! worker holds (lease ends are compared on the database's clock), must not mark offline a node
//! whose heartbeat is fresh on the database's clock, and must say at start that its clock is off
//! (in its log, and in `/healthz` with the skew).

use std::path::Path;
use std::time::{Duration, Instant};

use cohort_controller::db::models::operation::Operation;
use cohort_controller::db::schema::nodes;
use cohort_controller::jobs::{enqueue, Job, Step, StepKind};
use cohort_e2e::controller::{ControllerProcess, TestController};
use cohort_e2e::ports::PortRange;
use diesel::prelude::*;

/// Debian's libfaketime (installed by `scripts/setup`).
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// How far ahead the skewed controller's clock is.
const AHEAD_S: i64 = 600;

fn log(state: &Path) -> String {
    std::fs::read_to_string(state.join("controller.log")).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_whose_clock_is_ahead_takes_no_lease_early_and_silences_no_node() {
    assert!(
        Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: run scripts/setup (it installs libfaketime)"
    );
    // Built first: the lease and the heartbeat below are timed from the controller's start.
    cohort_e2e::controller::controller_binary();
    let t = TestController::new();
    let node = t.node("node-skew", (25000, 25063), 8, 16, false);
    let mut conn = t.conn();
    // A node heard from just now, on the database's clock.
    diesel::update(nodes::table.find(node.id))
        .set(nodes::last_heartbeat_at.eq(diesel::dsl::sql::<
            diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>,
        >("now()")))
        .execute(&mut conn)
        .unwrap();
    // An operation another worker holds for a minute.
    let op = enqueue(
        &mut conn,
        &Job::DeleteInstance(Default::default()),
        None,
        "held",
        &[Step::new(StepKind::Delete, "held", None)],
        None,
    )
    .unwrap();
    let held = Operation::claim(&mut conn, "holder", chrono::Duration::seconds(60))
        .unwrap()
        .expect("the test's worker claims it");
    assert_eq!(held.id, op.id);

    let ports = PortRange::claim();
    let faketime = format!("+{AHEAD_S}");
    let skewed = ControllerProcess::start(
        t.db.url(),
        t.state.path(),
        ports.port(0),
        &[
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME", &faketime),
            // tokio's timers keep the real monotonic clock.
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("COHORT_WORKER_ID", "skewed"),
            ("COHORT_OFFLINE_AFTER_S", "30"),
            ("COHORT_STARTUP_GRACE_S", "0"),
        ],
    );

    // It runs its worker and its offline check for a while (each every second or faster).
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut health = serde_json::Value::Null;
    while Instant::now() < deadline {
        if let Ok(res) = http.get(format!("{}/healthz", skewed.url())).send().await {
            health = res.json().await.unwrap_or_default();
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let text = log(t.state.path());
    assert!(
        text.contains("job worker started"),
        "the skewed controller's worker never started:\n{text}"
    );

    let now_op = Operation::find(&mut conn, op.id).unwrap().unwrap();
    assert_eq!(
        (now_op.claimed_by.as_deref(), now_op.claim_token),
        (Some("holder"), held.claim_token),
        "the controller whose clock is ahead took a lease that had 50 s left: {now_op:?}\n{text}"
    );
    let state: String = nodes::table
        .find(node.id)
        .select(nodes::state)
        .first(&mut conn)
        .unwrap();
    assert_eq!(
        state, "online",
        "a node heard from seconds ago was marked offline by a clock ten minutes ahead"
    );
    assert!(
        text.contains("clock is off from the database"),
        "no warning about the clock in the log:\n{text}"
    );
    let skew_ms = health["clock"]["skew_ms"].as_i64().unwrap_or_default();
    assert!(
        (AHEAD_S * 1000 - 5000..AHEAD_S * 1000 + 5000).contains(&skew_ms)
            && health["clock"]["ok"] == false,
        "/healthz shows no skew of about {AHEAD_S} s: {health}"
    );
}
