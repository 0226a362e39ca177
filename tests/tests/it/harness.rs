//! Proves the harness on the real daemons: a container from `cohort/base` in a test project, a
//! user with a generated key, a loopback port forwarded by a `proxy` device, a real ssh login;
//! what a test network leaves goes with its block.

use std::time::Duration;

use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestDb, TestLxd, TestNetwork};

#[test]
fn ssh_login_through_proxy_device_with_generated_key() {
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let port = ports.port(0);
    let key = SshKey::generate();
    let stranger = SshKey::generate();

    lxd.lxc_create(&[
        "launch",
        "cohort/base",
        "harness-c1",
        "-c",
        "security.idmap.isolated=true",
        "-c",
        "limits.memory=256MiB",
    ]);
    lxd.lxc(&[
        "exec",
        "harness-c1",
        "--",
        "useradd",
        "-m",
        "-s",
        "/bin/bash",
        "-u",
        "1000",
        "alice",
    ]);
    let keyfile = tempfile::NamedTempFile::new().expect("temp key file");
    std::fs::write(keyfile.path(), key.public_key() + "\n").expect("write key");
    lxd.lxc(&[
        "file",
        "push",
        "--create-dirs",
        "--uid",
        "1000",
        "--gid",
        "1000",
        "--mode",
        "0600",
        keyfile.path().to_str().expect("utf-8 path"),
        "harness-c1/home/alice/.ssh/authorized_keys",
    ]);
    lxd.lxc(&[
        "exec",
        "harness-c1",
        "--",
        "chown",
        "alice:alice",
        "/home/alice/.ssh",
    ]);
    lxd.lxc(&[
        "config",
        "device",
        "add",
        "harness-c1",
        "ssh",
        "proxy",
        &format!("listen=tcp:127.0.0.1:{port}"),
        "connect=tcp:127.0.0.1:22",
    ]);

    let out = key.run_when_up(
        "127.0.0.1",
        port,
        "alice",
        "whoami; hostname",
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "ssh login failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alice\nharness-c1\n");

    let refused = stranger.run("127.0.0.1", port, "alice", "whoami");
    assert_eq!(
        refused.status.code(),
        Some(255),
        "a key never installed got in"
    );
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("Permission denied"),
        "unexpected ssh error: {}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(refused.stdout.is_empty());
}

#[test]
fn test_lxd_project_is_removed_with_its_instances_on_drop() {
    let lxd = TestLxd::new();
    let project = lxd.project().to_string();
    lxd.lxc_create(&["launch", "cohort/base", "harness-c2"]);
    assert_eq!(lxd.instance_names(), vec!["harness-c2".to_string()]);
    drop(lxd);
    assert!(!cohort_e2e::lxd::project_exists(&project));
}

#[test]
fn test_db_is_migrated_private_and_dropped() {
    use diesel::prelude::*;
    let a = TestDb::new();
    let b = TestDb::new();
    assert_ne!(a.name(), b.name());
    let mut conn = a.connect();
    diesel::sql_query("CREATE TABLE only_in_a (x int)")
        .execute(&mut conn)
        .expect("create table in a");
    let in_b = diesel::sql_query("SELECT * FROM only_in_a").execute(&mut b.connect());
    assert!(
        in_b.is_err(),
        "a table made in one test database is visible in another"
    );
    let migrated = diesel::sql_query("SELECT version FROM __diesel_schema_migrations")
        .execute(&mut conn)
        .expect("migrations table exists");
    assert!(migrated >= 1);
    let name = a.name().to_string();
    drop(conn);
    drop(a);
    assert!(!cohort_e2e::db::database_exists(&name));
}

/// The harness's role may not end a session of another role, and an autovacuum worker is one:
/// `DROP DATABASE ... WITH (FORCE)` is refused while it is in the database. `drop_database`
/// waits such a session out instead of failing the test that happened to meet it.
#[test]
fn a_database_held_by_a_session_the_harness_may_not_end_is_dropped_once_it_leaves() {
    use diesel::prelude::*;
    let pg = cohort_e2e::pg::PrivatePg::start();
    let url = |role: &str, db: &str| format!("postgres://{role}@127.0.0.1:{}/{db}", pg.port);
    let mut superuser = PgConnection::establish(&pg.url()).expect("connect as superuser");
    diesel::sql_query("CREATE ROLE harness LOGIN CREATEDB")
        .execute(&mut superuser)
        .expect("create the harness's role");
    diesel::sql_query("CREATE ROLE other LOGIN")
        .execute(&mut superuser)
        .expect("create another role");
    let mut harness = PgConnection::establish(&url("harness", "cohort")).expect("connect");
    diesel::sql_query("CREATE DATABASE held")
        .execute(&mut harness)
        .expect("create held");
    let other = PgConnection::establish(&url("other", "held")).expect("other joins held");

    let refused = diesel::sql_query("DROP DATABASE held WITH (FORCE)")
        .execute(&mut harness)
        .expect_err("PostgreSQL let the harness end another role's session");
    assert!(
        refused.to_string().contains("must be a member of the role"),
        "refused for another reason: {refused}"
    );

    let leaves = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        drop(other);
    });
    cohort_e2e::db::drop_database(&mut harness, "held").expect("dropped once the session left");
    leaves.join().expect("the other session's thread");
    let left = diesel::sql_query("SELECT 1 FROM pg_database WHERE datname = 'held'")
        .execute(&mut harness)
        .expect("query pg_database");
    assert_eq!(left, 0, "held is still there");
}

#[test]
fn port_ranges_never_overlap() {
    let ranges: Vec<PortRange> = (0..4).map(|_| PortRange::claim()).collect();
    for (i, a) in ranges.iter().enumerate() {
        for b in &ranges[i + 1..] {
            assert!(
                a.last() < b.first() || b.last() < a.first(),
                "ranges overlap"
            );
        }
    }
}

/// A client that never ends is killed at its deadline and the test fails naming it, instead of
/// holding the run until CI's limit.
#[test]
fn a_client_command_past_its_deadline_is_killed_and_named() {
    let started = std::time::Instant::now();
    let pidfile = tempfile::NamedTempFile::new().expect("pid file");
    let script = format!(
        "echo $$ > {}; echo begun; exec sleep 60",
        pidfile.path().display()
    );
    let hung = std::panic::catch_unwind(|| {
        cohort_e2e::process::output_within(
            std::process::Command::new("sh").args(["-c", &script]),
            Duration::from_secs(2),
        )
    });
    let message = match hung {
        Ok(out) => panic!("a 60 s sleep ended within 2 s: {out:?}"),
        Err(e) => e
            .downcast_ref::<String>()
            .cloned()
            .expect("a panic message"),
    };
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "killed after {:?}",
        started.elapsed()
    );
    assert!(
        message.contains("did not end within 2s")
            && message.contains("sleep 60")
            && message.contains("begun"),
        "{message}"
    );
    let pid = std::fs::read_to_string(pidfile.path()).expect("pid");
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the client {pid} still runs"
    );
    // One that ends in time is answered as `Command::output` answers, stdin fed.
    let out = cohort_e2e::process::output_with_input_within(
        std::process::Command::new("sh").args(["-c", "tr a-z A-Z; echo err >&2; exit 3"]),
        b"quiet",
        Duration::from_secs(30),
    );
    assert_eq!(
        (out.status.code(), &out.stdout[..], &out.stderr[..]),
        (Some(3), &b"QUIET"[..], &b"err\n"[..])
    );
}

/// A test still running past its limit ends the test binary, saying which test and what it
/// was waiting on, so a hang fails the run within CI's time and names itself.
#[test]
fn a_test_past_its_limit_ends_the_binary_naming_it_and_its_processes() {
    let started = std::time::Instant::now();
    let out = cohort_e2e::process::output_within(
        // A program of this crate (src/bin) that hangs as a test would.
        std::process::Command::new(cohort_e2e::controller::built_binary("cohort-test-hang"))
            .env("COHORT_TEST_LIMIT_S", "2"),
        Duration::from_secs(100),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "ended after {:?}",
        started.elapsed()
    );
    // The aborted program's child outlives it; it is ended here.
    let _ = std::process::Command::new("pkill")
        .args(["-x", "-f", "sleep 127"])
        .status();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(6), "aborted: {stderr}");
    assert!(
        stderr.contains("[watchdog] test harness::a_hung_test still running after 2s")
            && stderr.contains("sleep 127"),
        "{stderr}"
    );
}

/// A node network's bridge that no daemon holds (a daemon lost it, or a run was killed between
/// the daemon's delete and the kernel's) goes with its block: a daemon would see it as a host
/// interface and refuse to make its own, and the next agent on the block would have no network.
#[test]
fn a_bridge_no_daemon_holds_goes_with_its_block() {
    let net = TestNetwork::claim();
    let name = net.name();
    cohort_e2e::network::run("ip", &["link", "add", &name, "type", "bridge"]);
    let exists = || {
        std::process::Command::new("ip")
            .args(["link", "show", &name])
            .output()
            .expect("run ip")
            .status
            .success()
    };
    assert!(exists());
    drop(net);
    assert!(!exists(), "{name} is left behind");
}
