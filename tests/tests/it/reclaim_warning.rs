//! Issue 43, "warned before reclaimed": the reclaimer tells a student before it stops their
//! container (longest run, idleness) and acts only once the course's `warn_minutes` have passed.
//! End to end on a real node (LXD and Incus), PostgreSQL and ssh:
//! - the warning arrives in a real SSH session's terminal (a student logged in with a pty);
//! - the container is not stopped before the warning's `due_at`, and is stopped after it;
//! - Keep working postpones the stop once (by `warn_minutes` for the longest run); a second
//!   press is 409, someone else's press 403; both the warning and the press are audited;
//! - an idle stop is warned and waits the same way;
//! - `warn_minutes` out of range is a 400 naming the field, and `cohort course set
//!   --warn-minutes` sets it.
//!
//! A reclaim minute is 5 s here, so `warn_minutes = 3` is 15 s.

use crate::cli_support::OneNode;
use crate::reclaim_use::{endpoint, roster};

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cohort_e2e::bodies::to_json;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::users::CreateApiToken;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use serde_json::{json, Value};

const FAST_RECLAIM: [(&str, &str); 2] = [
    ("COHORT_RECLAIM_INTERVAL_S", "1"),
    ("COHORT_RECLAIM_MINUTE_S", "5"),
];

/// One call to the controller's API with `token`: the status and the JSON answered.
fn api(node: &OneNode, token: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "-o", "-", "-w", "\n%{http_code}", "-X", method])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .args(["-H", "Content-Type: application/json"]);
    if let Some(b) = body {
        cmd.args(["--data", &b.to_string()]);
    }
    let out = cmd
        .arg(format!("{}/api/v1{path}", node.controller.url))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (json, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let code = code
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{method} {path}: {text}"));
    (code, serde_json::from_str(json).unwrap_or(Value::Null))
}

fn token_for(node: &OneNode, user: &str) -> String {
    let (code, issued) = api(
        node,
        &node.controller.admin_token,
        "POST",
        &format!("/users/{user}/tokens"),
        Some(to_json(&CreateApiToken::default())),
    );
    assert_eq!(code, 201, "{issued}");
    issued["token"].as_str().expect("token").to_string()
}

#[derive(QueryableByName, Debug)]
struct Seen {
    #[diesel(sql_type = Text)]
    desired_state: String,
    #[diesel(sql_type = Nullable<Text>)]
    stop_reason: Option<String>,
    #[diesel(sql_type = Nullable<Timestamptz>)]
    stopped_at: Option<DateTime<Utc>>,
}

fn seen(db: &str, name: &str) -> Seen {
    let mut conn = PgConnection::establish(db).expect("database");
    diesel::sql_query(
        "SELECT i.desired_state, u.stop_reason, u.stopped_at
           FROM instances i LEFT JOIN instance_usage u ON u.instance_id = i.id
          WHERE i.name = $1",
    )
    .bind::<Text, _>(name)
    .get_result(&mut conn)
    .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

fn audited(db: &str, action: &str, object: &str) -> i64 {
    let mut conn = PgConnection::establish(db).expect("database");
    diesel::sql_query("SELECT count(*) AS n FROM audit_log WHERE action = $1 AND object = $2")
        .bind::<Text, _>(action)
        .bind::<Text, _>(object)
        .get_result::<Count>(&mut conn)
        .expect("audit")
        .n
}

fn sql(db: &str, statement: &str) {
    let mut conn = PgConnection::establish(db).expect("database");
    diesel::sql_query(statement)
        .execute(&mut conn)
        .expect(statement);
}

/// Waits (bounded) until `name` is stopped by the reclaimer, asserting on the way that it is not
/// stopped before `due` (the database's clock is the reclaimer's); its view then.
fn stopped_after(node: &OneNode, name: &str, due: DateTime<Utc>, within: Duration) -> Seen {
    let db = node.controller.db_url();
    let deadline = Instant::now() + within;
    loop {
        let s = seen(db, name);
        if s.desired_state == "stopped" {
            let at = s.stopped_at.expect("stopped_at");
            assert!(
                at >= due,
                "{name} stopped at {at}, before its warning's due {due}"
            );
            return s;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(node.controller.state.path().join("serve.log"))
                .unwrap_or_default();
            panic!("{name} not stopped within {within:?}: {s:?}\n{log}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A student's interactive SSH session (a pty in the container), its output kept.
struct Terminal {
    child: Child,
    output: Arc<Mutex<Vec<u8>>>,
}

impl Terminal {
    fn open(key: &SshKey, (host, port): &(String, u16), user: &str) -> Self {
        let up = key.run_when_up(host, *port, user, "true", Duration::from_secs(90));
        assert!(up.status.success(), "{user}'s ssh: {up:?}");
        let mut child = Command::new("ssh")
            .args([
                "-tt",
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
            ])
            .args(["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"])
            .arg("-i")
            .arg(key.private_key())
            .args(["-p", &port.to_string(), &format!("{user}@{host}")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("ssh");
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut stdout = child.stdout.take().expect("stdout");
        let sink = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("output").extend_from_slice(&buf[..n]);
            }
        });
        Terminal { child, output }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().expect("output")).to_string()
    }

    /// Waits (bounded) until the terminal has shown `text`.
    fn wait_for(&self, text: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.text().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} not shown in the terminal within {within:?}; it shows {:?}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn due_of(warnings: &Value, reason: &str) -> DateTime<Utc> {
    let w = warnings
        .as_array()
        .and_then(|ws| ws.iter().find(|w| w["reason"] == reason))
        .unwrap_or_else(|| panic!("a {reason} warning in {warnings}"));
    w["due_at"]
        .as_str()
        .expect("due_at")
        .parse()
        .expect("due_at")
}

fn warned_then_stopped(daemon: TestDaemon) {
    let started = Instant::now();
    let node = OneNode::start_with_env_on(daemon, &FAST_RECLAIM);
    let db = node.controller.db_url().to_string();
    let cli = &node.cli;
    let admin = node.controller.admin_token.clone();
    for code in ["rw1", "rw2"] {
        cli.ok(&[
            "course",
            "create",
            code,
            "--title",
            "Warn",
            "--image",
            "cohort/base",
            "--memory",
            "256MiB",
            "--disk",
            "2GiB",
        ]);
    }
    // Out of range is refused, naming the field; nothing is written.
    for bad in [json!({"warn_minutes": 1441}), json!({"warn_minutes": -1})] {
        let (code, body) = api(
            &node,
            &admin,
            "PUT",
            "/courses/rw1/reclaim-warning",
            Some(bad),
        );
        assert_eq!(code, 400, "{body}");
        assert_eq!(body["error"]["field"], "warn_minutes", "{body}");
    }
    let (code, body) = api(
        &node,
        &admin,
        "POST",
        "/courses",
        Some(json!({"code": "rw3", "title": "x", "image": "cohort/base", "warn_minutes": 5000})),
    );
    assert_eq!(
        (code, &body["error"]["field"]),
        (400, &json!("warn_minutes")),
        "{body}"
    );
    assert!(cli
        .ok(&["course", "show", "rw1"])
        .contains("warn_minutes: 10"));
    cli.ok(&["course", "set", "rw1", "--warn-minutes", "3"]);
    cli.ok(&["course", "set", "rw2", "--warn-minutes", "3"]);
    assert!(cli
        .ok(&["course", "show", "rw1"])
        .contains("warn_minutes: 3"));

    let (ann, bob, cat) = (SshKey::generate(), SshKey::generate(), SshKey::generate());
    roster(&node, "rw1", &[("ann", &ann), ("bob", &bob)]);
    roster(&node, "rw2", &[("cat", &cat)]);
    let ann_terminal = Terminal::open(&ann, &endpoint(&node, "rw1", "ann"), "ann");
    let cat_terminal = Terminal::open(&cat, &endpoint(&node, "rw2", "cat"), "cat");
    let (ann_token, bob_token) = (token_for(&node, "ann"), token_for(&node, "bob"));

    // rw1 stops after six minutes of running (30 s), rw2 after six idle minutes: each is warned
    // 3 minutes (15 s) ahead, or at once where that time has passed, and stopped once its
    // warning is due and its limit reached.
    sql(&db, "UPDATE course_reclaim SET max_runtime_minutes = 6 WHERE course_id = (SELECT id FROM courses WHERE code = 'rw1')");
    sql(&db, "UPDATE course_reclaim SET idle_gpu_minutes = 6 WHERE course_id = (SELECT id FROM courses WHERE code = 'rw2')");
    ann_terminal.wait_for(
        "Cohort: rw1-ann reaches its course's longest run",
        Duration::from_secs(90),
    );
    cat_terminal.wait_for(
        "Cohort: rw2-cat has not been used for a while",
        Duration::from_secs(90),
    );

    let (code, ann_warnings) = api(
        &node,
        &ann_token,
        "GET",
        "/instances/rw1-ann/reclaim-warnings",
        None,
    );
    assert_eq!(code, 200, "{ann_warnings}");
    let ann_due = due_of(&ann_warnings, "max_runtime");
    let (code, cat_warnings) = api(
        &node,
        &admin,
        "GET",
        "/instances/rw2-cat/reclaim-warnings",
        None,
    );
    assert_eq!(code, 200, "{cat_warnings}");
    let cat_due = due_of(&cat_warnings, "idle");
    assert_eq!(audited(&db, "reclaim_warning", "rw1-ann"), 1);

    // Bob keeps working, once; Ann may not press his button; his second press says why not.
    let (code, refused) = api(
        &node,
        &ann_token,
        "POST",
        "/instances/rw1-bob/keep-working",
        None,
    );
    assert_eq!(code, 403, "{refused}");
    let (code, bob_before) = api(
        &node,
        &bob_token,
        "GET",
        "/instances/rw1-bob/reclaim-warnings",
        None,
    );
    assert_eq!(code, 200, "{bob_before}");
    let (code, bob_kept) = api(
        &node,
        &bob_token,
        "POST",
        "/instances/rw1-bob/keep-working",
        None,
    );
    assert_eq!(code, 200, "{bob_kept}");
    let bob_due = due_of(&bob_kept, "max_runtime");
    assert_eq!(
        bob_due - due_of(&bob_before, "max_runtime"),
        chrono::Duration::seconds(15)
    );
    let (code, again) = api(
        &node,
        &bob_token,
        "POST",
        "/instances/rw1-bob/keep-working",
        None,
    );
    assert_eq!(code, 409, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("already used"),
        "{again}"
    );
    assert_eq!(audited(&db, "keep_working", "rw1-bob"), 1);

    let ann_seen = stopped_after(&node, "rw1-ann", ann_due, Duration::from_secs(90));
    assert!(
        ann_seen
            .stop_reason
            .as_deref()
            .unwrap_or_default()
            .contains("max_runtime is 6 minutes"),
        "{ann_seen:?}"
    );
    let cat_seen = stopped_after(&node, "rw2-cat", cat_due, Duration::from_secs(90));
    assert!(
        cat_seen
            .stop_reason
            .as_deref()
            .unwrap_or_default()
            .contains("idle_gpu_minutes is 6"),
        "{cat_seen:?}"
    );
    // Bob's stop waits for his postponed due; after it, nothing is pending to keep.
    stopped_after(&node, "rw1-bob", bob_due, Duration::from_secs(90));
    let (code, none) = api(
        &node,
        &bob_token,
        "POST",
        "/instances/rw1-bob/keep-working",
        None,
    );
    assert_eq!(code, 409, "{none}");
    // Told once over the many passes of the wait: the row, not the pass, remembers it.
    assert_eq!(audited(&db, "reclaim_warning", "rw1-ann"), 1);
    let told = ann_terminal
        .text()
        .matches("reaches its course's longest run")
        .count();
    assert_eq!(told, 1, "{}", ann_terminal.text());
    eprintln!("warned and stopped in {:?}", started.elapsed());
}

#[test]
fn a_warning_reaches_the_terminal_before_the_stop_on_lxd() {
    warned_then_stopped(TestDaemon::Lxd);
}

#[test]
fn a_warning_reaches_the_terminal_before_the_stop_on_incus() {
    warned_then_stopped(TestDaemon::Incus);
}
