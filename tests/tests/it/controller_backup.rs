//! Running Cohort for years (issue 31), with real processes, LXD, PostgreSQL and ssh: a
//! controller backed up, its database and state destroyed, restored onto a fresh database, and
//! every student still logging in with nothing made or handed out twice; and a rolling upgrade,
//! where `migrate` refuses to change the schema under a controller that is still running.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cohort_controller::db::{other_sessions, pending_migrations, MIGRATIONS};
use cohort_e2e::bodies::{course, new_user, to_json, CreateCourse, Role};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::controller::{controller_binary, ControllerProcess};
use cohort_e2e::ports::PortRange;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestDb;
use diesel_migrations::MigrationHarness;
use reqwest::Method;
use serde_json::{json, Value};

fn controller(args: &[&str], db_url: &str, state_dir: &Path) -> Output {
    Command::new(controller_binary())
        .args(args)
        .env("DATABASE_URL", db_url)
        .env("COHORT_STATE_DIR", state_dir)
        .output()
        .expect("run cohort-controller")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

async fn json_ok(cluster: &Cluster, method: Method, path: &str, token: &str, body: Value) -> Value {
    let res = cluster
        .request(method.clone(), path, token)
        .json(&body)
        .send()
        .await
        .expect("controller answers");
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    assert!(status.is_success(), "{method} {path}: {status} {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// Each student's (username, ssh port) from the course's student list.
async fn ports(cluster: &Cluster, token: &str, code: &str) -> Vec<(String, u16)> {
    let students: Value = cluster
        .request(Method::GET, &format!("/courses/{code}/students"), token)
        .send()
        .await
        .expect("students")
        .json()
        .await
        .expect("json");
    let mut out: Vec<(String, u16)> = students
        .as_array()
        .expect("students")
        .iter()
        .map(|s| {
            (
                s["username"].as_str().expect("username").to_string(),
                s["ssh_port"].as_u64().expect("port") as u16,
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_restored_onto_a_fresh_database_keeps_every_student() {
    let mut cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-bk", "instructor").await;
    json_ok(
        &cluster,
        Method::POST,
        "/courses",
        &teacher,
        to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("bk1", "Backups", "cohort/base")
        }),
    )
    .await;
    let keys = [SshKey::generate(), SshKey::generate()];
    let res = cluster
        .request(Method::POST, "/courses/bk1/roster", &teacher)
        .header("content-type", "text/csv")
        .body(format!(
            "username,name,email,ssh_key\nann,,,{}\nben,,,{}\n",
            keys[0].public_key(),
            keys[1].public_key()
        ))
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 200);
    let op = cluster.provision("bk1", &teacher).await;
    assert_eq!(op["status"], "success", "{op}");
    let before = ports(&cluster, &teacher, "bk1").await;
    assert_eq!(before.len(), 2);

    let state_dir = cluster.state.path().join("controller");
    let archive = cluster.state.path().join("backup.tar.gz");
    let out = controller(
        &["backup", "--output", archive.to_str().expect("utf-8 path")],
        &cluster.db_url,
        &state_dir,
    );
    assert!(out.status.success(), "backup: {}", text(&out));

    // The controller's host is lost: the process, its database and its state directory.
    cluster.controller.kill();
    cluster
        .db
        .as_ref()
        .expect("the cluster's own database")
        .recreate_empty();
    std::fs::remove_dir_all(&state_dir).expect("remove the state directory");

    // A restore refuses a database that is not empty, and leaves it as it was.
    let busy = TestDb::new();
    let refused = controller(
        &["restore", archive.to_str().expect("utf-8 path")],
        busy.url(),
        &cluster.state.path().join("elsewhere"),
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("restore needs an empty database"),
        "{}",
        text(&refused)
    );
    assert!(!cluster.state.path().join("elsewhere").exists());

    let out = controller(
        &["restore", archive.to_str().expect("utf-8 path")],
        &cluster.db_url,
        &state_dir,
    );
    assert!(out.status.success(), "restore: {}", text(&out));
    assert!(state_dir.join("ca.crt").exists());

    cluster.restart_controller();
    cluster
        .wait_node_state("node1", "online", Duration::from_secs(90))
        .await;
    let after = ports(&cluster, &teacher, "bk1").await;
    assert_eq!(
        after, before,
        "the restored inventory hands out the same ports"
    );
    for ((user, port), key) in after.iter().zip(&keys) {
        let out = key.run_when_up("127.0.0.1", *port, user, "whoami", Duration::from_secs(90));
        assert!(
            out.status.success(),
            "{user} cannot log in after the restore: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{user}\n"));
    }
    // Nothing is made twice: a provision finds every container there, LXD holds two.
    let again = cluster.provision("bk1", &teacher).await;
    assert_eq!(again["status"], "success", "{again}");
    assert_eq!(again["items"], json!([]), "{again}");
    let listed = cluster.nodes[0].lxd.lxc(&["list", "-f", "csv", "-c", "n"]);
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort();
    assert_eq!(names, ["bk1-ann", "bk1-ben"], "{listed}");
}

#[test]
fn migrate_refuses_to_change_the_schema_under_a_running_controller() {
    let db = TestDb::new();
    let state = tempfile::tempdir().expect("state dir");
    let init = controller(&["init"], db.url(), state.path());
    assert!(init.status.success(), "init: {}", text(&init));
    let ports = PortRange::claim();
    let mut running = ControllerProcess::start(db.url(), state.path(), ports.port(0), &[]);

    // This release's database is one migration ahead of what the running controller needs
    // to be replaced: take the newest back, as a database of the previous release would be.
    let newest = {
        let mut conn = db.connect();
        let version = conn
            .revert_last_migration(MIGRATIONS)
            .expect("revert the newest migration")
            .to_string();
        assert_eq!(
            pending_migrations(&mut conn).expect("pending"),
            vec![version.clone()]
        );
        version
    };

    let refused = controller(&["migrate"], db.url(), state.path());
    assert!(!refused.status.success(), "{}", text(&refused));
    let message = text(&refused);
    assert!(message.contains("1 migration(s) to apply"), "{message}");
    assert!(message.contains("cohort-controller 0.1.0"), "{message}");
    assert!(message.contains("Stop every controller"), "{message}");
    assert_eq!(
        pending_migrations(&mut db.connect()).expect("pending"),
        vec![newest.clone()],
        "a refused migrate changed the schema"
    );

    running.kill();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !other_sessions(&mut db.connect())
        .expect("sessions")
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the killed controller's sessions stay"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = controller(&["migrate"], db.url(), state.path());
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("applied migration {newest}")),
        "{}",
        text(&out)
    );
}

/// A primary with standbys: the URL lists several hosts and libpq finds the one that takes
/// writes. Here the first host is down (nothing listens on its port); the controller
/// initialises, serves and writes through the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_with_several_hosts_finds_the_one_that_writes() {
    let db = TestDb::new();
    let ports = PortRange::claim();
    let (_, rest) = db.url().split_once('@').expect("user@host in the test URL");
    let (hostport, name) = rest.split_once('/').expect("host/database");
    let url = format!(
        "postgres://cohort:cohort@127.0.0.1:{},{hostport}/{name}?target_session_attrs=read-write",
        ports.port(1)
    );
    let state = tempfile::tempdir().expect("state dir");
    let init = controller(&["init", "--admin", "dba"], &url, state.path());
    assert!(init.status.success(), "init: {}", text(&init));
    let token = String::from_utf8_lossy(&init.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("admin token (shown once): "))
        .expect("the admin token")
        .trim()
        .to_string();
    let _serving = ControllerProcess::start(&url, state.path(), ports.port(0), &[]);
    let ca = std::fs::read(state.path().join("ca.crt")).expect("CA");
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("pem"))
        .build()
        .expect("client");
    let created = http
        .post(format!("https://127.0.0.1:{}/api/v1/users", ports.port(0)))
        .bearer_auth(&token)
        .json(&new_user("writer", Role::Student))
        .send()
        .await
        .expect("controller answers");
    assert_eq!(
        created.status(),
        201,
        "{}",
        created.text().await.unwrap_or_default()
    );
}
