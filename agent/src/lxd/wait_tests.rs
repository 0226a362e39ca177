//! How an operation's wait reads each daemon's answers, against a scripted daemon on a unix
//! socket: Incus answers `/wait` with an error both when the wait's own timeout passed and when
//! the operation failed, and both daemons forget an operation 5 s after it ends.

use std::time::Duration;

use serde_json::{json, Value};

use super::scripted::{daemon, error};

const OP: &str = "/1.0/operations/op-1";

fn operation(status_code: u16, err: &str) -> (u16, Value) {
    (
        200,
        json!({"type": "sync", "metadata": {
            "id": "op-1", "status_code": status_code, "err": err, "metadata": {"done": true}
        }}),
    )
}

const SHUTDOWN_RAN_OUT: &str =
    "Failed shutting down instance, status is \"Running\": context deadline exceeded";

/// The failure found live: a clean stop that ran out of time on Incus. Its error ends like a
/// wait's own timeout; read as "not yet", the wait asked again until Incus had forgotten the
/// operation and answered 404, and the agent called the instance missing instead of forcing.
#[tokio::test]
async fn a_failed_operation_whose_error_ends_like_a_timeout_is_its_failure() {
    let (lxd, script, _dir) = daemon(vec![
        error(500, SHUTDOWN_RAN_OUT),
        operation(400, SHUTDOWN_RAN_OUT),
        error(404, "Operation not found"),
        error(404, "Operation not found"),
    ])
    .await;
    let err = lxd
        .wait(OP, "stop", Duration::from_secs(60))
        .await
        .expect_err("the stop failed");
    assert!(!err.is_not_found(), "{err}");
    assert_eq!(err.lxd_message(), Some(SHUTDOWN_RAN_OUT));
    let asked = script.asked.lock().unwrap().clone();
    assert_eq!(
        asked,
        [
            "GET /1.0/operations/op-1/wait?timeout=30 HTTP/1.1",
            "GET /1.0/operations/op-1 HTTP/1.1"
        ]
    );
}

/// Incus's answer when the wait's own timeout passed: the operation, still running, is waited
/// for again; one that ended between the two requests is its result.
#[tokio::test]
async fn a_wait_whose_own_timeout_passed_waits_again() {
    let (lxd, script, _dir) = daemon(vec![
        error(500, "context deadline exceeded"),
        operation(103, ""),
        operation(200, ""),
        error(500, "context deadline exceeded"),
        operation(200, ""),
    ])
    .await;
    let done = lxd
        .wait(OP, "start", Duration::from_secs(20))
        .await
        .expect("it ended well");
    assert_eq!(done, json!({"done": true}));
    assert_eq!(script.asked.lock().unwrap().len(), 3);
    let done = lxd
        .wait(OP, "start", Duration::from_secs(20))
        .await
        .expect("it ended between the two requests");
    assert_eq!(done, json!({"done": true}));
    assert_eq!(script.asked.lock().unwrap().len(), 5);
}

/// An operation the daemon has forgotten (its wait came more than 5 s after it ended) stays the
/// daemon's 404, which a create's retry reads as "finished a while ago"; the daemon's own 404 for
/// a failed operation stays as given too.
#[tokio::test]
async fn a_forgotten_operation_is_the_daemons_404() {
    let (lxd, script, _dir) = daemon(vec![
        error(404, "Operation not found"),
        error(404, "Operation not found"),
        error(404, "Instance not found"),
        operation(400, "Instance not found"),
    ])
    .await;
    let err = lxd
        .wait(OP, "create", Duration::from_secs(20))
        .await
        .expect_err("its outcome is unknown");
    assert!(err.is_not_found(), "{err:?}");
    assert_eq!(err.lxd_message(), Some("Operation not found"));
    assert_eq!(script.asked.lock().unwrap().len(), 2, "no wait again");
    let err = lxd
        .wait(OP, "start", Duration::from_secs(20))
        .await
        .expect_err("the instance went away");
    assert!(
        err.is_not_found(),
        "Incus's own 404 for the failure: {err:?}"
    );
    assert_eq!(err.lxd_message(), Some("Instance not found"));
}

/// An exec session's state on Incus: a wait that timed out is the session still running, a
/// failed one is its operation as it ended, and a forgotten one stays "not found".
#[tokio::test]
async fn a_sessions_state_is_read_from_its_operation() {
    let (lxd, _script, _dir) = daemon(vec![
        error(500, "context deadline exceeded"),
        operation(103, ""),
        error(500, "Command not found"),
        operation(400, "Command not found"),
        error(404, "Operation not found"),
        error(404, "Operation not found"),
    ])
    .await;
    let running = lxd.wait_operation("op-1", 5).await.expect("still running");
    assert_eq!(running.status_code, 103);
    let failed = lxd.wait_operation("op-1", 5).await.expect("it ended");
    assert_eq!(
        (failed.status_code, failed.err.as_str()),
        (400, "Command not found")
    );
    let gone = lxd.wait_operation("op-1", 5).await.expect_err("forgotten");
    assert!(gone.is_not_found(), "{gone:?}");
}
