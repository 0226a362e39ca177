//! Issue 45's restore of one path out of a home snapshot, with real processes, PostgreSQL and
//! LXD and Incus: a file (from the portal's container page on LXD, through the API on Incus)
//! and a directory (through `cohort home restore --path`) come back into
//! `~/restored/<snapshot>/`, their contents, owner, modes and links as they were in the
//! snapshot, while the container keeps running (a process started before lives on). Bad paths
//! (absolute, `..`, through a link of the snapshot, absent) and an absent snapshot are 4xx
//! naming their field and leave nothing in the home; another student gets 403, the course's
//! instructor may restore for the student; the audit log records each restore with its path.

use std::process::Output;
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::{PortRange, TestLxd};
use cohort_proto::api::instances::RestoreHomeRequest;
use reqwest::Method;
use serde_json::json;

use crate::cli_support::Cli;
use crate::home_snapshots::{call, field};

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

async fn restore_a_path(daemon: TestDaemon, code: &str) {
    let mut cluster = Cluster::start(0).await;
    cluster.add_node_in("node1", TestLxd::on(daemon)).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user(&format!("prof-{code}"), "instructor").await;
    let course = CreateCourse {
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(code, "Restore", "cohort/base")
    };
    call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(to_json(&course)),
        201,
    )
    .await;
    let roster = cluster
        .request(Method::POST, &format!("/courses/{code}/roster"), &prof)
        .header("content-type", "text/csv")
        .body("username,name,email,ssh_key\nstu,Stu,,\n")
        .send()
        .await
        .expect("roster");
    assert_eq!(roster.status(), 200);
    let op = call(
        &cluster,
        Method::POST,
        &format!("/courses/{code}/provision"),
        &prof,
        Some(json!({})),
        202,
    )
    .await;
    let done = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");

    let inst = format!("{code}-stu");
    let volume = format!("home-{code}-stu");
    let lxd = &cluster.nodes[0].lxd;
    let sh = |cmd: &str| lxd.lxc_output(&["exec", &inst, "--", "sh", "-c", cmd]);
    // A read-only command that must succeed: its output. Tried up to three times: under load
    // an exec once answered nothing at all (no output, no error) on Incus.
    let read = |cmd: &str| {
        let mut tries = 0;
        loop {
            tries += 1;
            let out = sh(cmd);
            if (out.status.success() && !out.stdout.is_empty()) || tries == 3 {
                assert!(
                    out.status.success(),
                    "{cmd}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                return text(&out);
            }
        }
    };
    let made = sh("set -e; cd /home/stu; mkdir -p notes project/src; \
         printf 'week three\\n' > notes/week3.md; chmod 640 notes/week3.md; \
         printf 'int main;\\n' > project/src/main.c; chmod 750 project/src; \
         ln -s /etc project/etc-link; ln -s /etc outside; \
         chown -R stu:stu notes project; chown -h stu:stu outside; sync");
    assert!(made.status.success(), "{made:?}");
    let mut snapshot = vec!["storage", "volume", "snapshot"];
    if matches!(daemon, TestDaemon::Incus) {
        snapshot.push("create");
    }
    snapshot.extend(["cohort", volume.as_str()]);
    lxd.lxc(&snapshot);
    // Later work: the file deleted, the directory changed.
    let changed = sh("rm /home/stu/notes/week3.md; echo changed > /home/stu/project/src/main.c");
    assert!(changed.status.success(), "{changed:?}");
    // A process that must outlive every restore of a path.
    let sleeper = sh("setsid sleep 900 </dev/null >/dev/null 2>&1 & echo $!");
    let sleeper = text(&sleeper);
    assert!(sleeper.parse::<u32>().is_ok(), "{sleeper}");

    let stu = cluster.token_for("stu").await;
    let eve = cluster.user(&format!("eve-{code}"), "student").await;
    let listed = call(
        &cluster,
        Method::GET,
        &format!("/instances/{inst}/home/snapshots"),
        &stu,
        None,
        200,
    )
    .await;
    let snap = listed[0]["name"].as_str().expect("a snapshot").to_string();
    let restore = format!("/instances/{inst}/home/restore");

    // Bad input: a 4xx at its field, nothing made in the home.
    let started = Instant::now();
    for (path, snapshot, status, name) in [
        ("/etc/passwd", snap.as_str(), 400, "path"),
        ("../../etc", snap.as_str(), 400, "path"),
        ("outside/passwd", snap.as_str(), 400, "path"),
        ("notes/week4.md", snap.as_str(), 404, "path"),
        ("notes", "nosuch", 404, "snapshot"),
    ] {
        let body = json!({"snapshot": snapshot, "path": path});
        let answer = call(&cluster, Method::POST, &restore, &stu, Some(body), status).await;
        assert_eq!(field(&answer), name, "{path}: {answer}");
    }
    let body = to_json(&RestoreHomeRequest {
        snapshot: snap.clone(),
        path: Some("notes/week3.md".into()),
    });
    call(
        &cluster,
        Method::POST,
        &restore,
        &eve,
        Some(body.clone()),
        403,
    )
    .await;
    let untouched =
        sh("test ! -e /home/stu/restored && ! ls -A /home/stu | grep -q cohort-restore");
    assert!(untouched.status.success(), "something was made in the home");
    eprintln!("bad input answered in {:?}", started.elapsed());

    // A file: on LXD from the portal (a refused path first, shown next to its field), on Incus
    // through the API.
    let started = Instant::now();
    match daemon {
        TestDaemon::Lxd => {
            let state = cluster.state.path().join("controller");
            set_portal_password(
                &cluster.db_url,
                &state,
                "stu",
                "the student's long password",
            );
            let base = cluster.controller.url();
            let browser = Browser::start(PortRange::claim().port(1), "en").await;
            browser
                .sign_in(&base, "stu", "the student's long password")
                .await;
            browser.goto(&format!("{base}/containers/{inst}")).await;
            let input = format!("#restore-path-{snap}");
            let button = format!("#restore-path-button-{snap}");
            browser.type_into(&input, "outside/passwd").await;
            browser.follow(&button).await;
            let error = browser.text(&format!("#restore-path-error-{snap}")).await;
            assert!(error.contains("link"), "{error}");
            browser.type_into(&input, "notes/week3.md").await;
            browser.follow(&button).await;
            assert_eq!(
                browser.count(&format!("#restore-path-error-{snap}")).await,
                0
            );
        }
        TestDaemon::Incus => {
            let op = call(&cluster, Method::POST, &restore, &stu, Some(body), 202).await;
            let done = cluster
                .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(120))
                .await;
            assert_eq!(done["status"], "success", "{done}");
        }
    }
    let file = format!("/home/stu/restored/{snap}/notes/week3.md");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let out = sh(&format!("cat {file}"));
        if out.status.success() {
            assert_eq!(text(&out), "week three");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{file} never came: {}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(read(&format!("stat -c '%U:%G %a' {file}")), "stu:stu 640");
    eprintln!("file restored in {:?}", started.elapsed());

    // A directory, with the CLI (it waits for the operation); a bad path is its `Error:` line.
    let started = Instant::now();
    let cli = Cli {
        conf: tempfile::tempdir().expect("conf dir"),
    };
    cli.ok(&[
        "remote",
        "add",
        "lab",
        &cluster.controller.url(),
        "--token",
        &stu,
        "--accept-certificate",
    ]);
    let target = format!("lab:{inst}");
    cli.fails(
        &["home", "restore", &target, &snap, "--path", "/etc"],
        "relative",
    );
    cli.ok(&["home", "restore", &target, &snap, "--path", "project/"]);
    let dir = format!("/home/stu/restored/{snap}/project");
    assert_eq!(read(&format!("cat {dir}/src/main.c")), "int main;");
    assert_eq!(
        read(&format!("stat -c '%U:%G %a' {dir}/src")),
        "stu:stu 750"
    );
    assert_eq!(read(&format!("readlink {dir}/etc-link")), "/etc");
    assert_eq!(read(&format!("stat -c '%U:%G' {dir}/etc-link")), "stu:stu");
    // The home's own copy is as the student left it; nothing staged is left behind.
    assert_eq!(read("cat /home/stu/project/src/main.c"), "changed");
    let leftovers = sh("ls -A /home/stu | grep cohort-restore");
    assert!(!leftovers.status.success(), "{}", text(&leftovers));
    let emptied = "test -d /var/lib/cohort-restore && test -z \"$(ls -A /var/lib/cohort-restore)\"";
    assert!(
        sh(emptied).status.success(),
        "a tarball is left in the container"
    );
    eprintln!("directory restored in {:?}", started.elapsed());

    // The course's instructor may restore for their student: the copy is still the student's.
    let body = to_json(&RestoreHomeRequest {
        snapshot: snap.clone(),
        path: Some("notes".into()),
    });
    let op = call(&cluster, Method::POST, &restore, &prof, Some(body), 202).await;
    let done = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(120))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(read(&format!("stat -c '%U:%G %a' {file}")), "stu:stu 640");

    // The container ran through it all: still running, the process alive.
    let shown = call(
        &cluster,
        Method::GET,
        &format!("/instances/{inst}"),
        &stu,
        None,
        200,
    )
    .await;
    assert_eq!(shown["observed_state"], "running", "{shown}");
    let alive = sh(&format!("kill -0 {sleeper}"));
    assert!(alive.status.success(), "the process started before is gone");

    let audit = call(
        &cluster,
        Method::GET,
        &format!("/audit?action=restore_home_path&object={inst}"),
        &cluster.admin_token,
        None,
        200,
    )
    .await;
    let audit = audit.to_string();
    assert!(
        audit.contains("notes/week3.md") && audit.contains("\"project\""),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_path_comes_back_into_the_running_home_on_lxd() {
    restore_a_path(TestDaemon::Lxd, "rplxd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_path_comes_back_into_the_running_home_on_incus() {
    restore_a_path(TestDaemon::Incus, "rpinc").await;
}
