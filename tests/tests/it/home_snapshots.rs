//! Issue 45's home snapshots, with real processes, PostgreSQL and LXD and Incus: a course's
//! `home_snapshots` and `home_snapshots_keep` reach each student's home volume as the daemon's
//! own `snapshots.schedule`, `snapshots.expiry` and `snapshots.pattern`, at its container's
//! create and, for homes already made, through the operation a change answers; bad values are
//! refused at their field.
//!
//! A student lists their home's snapshots and restores one, whole (from the portal's container
//! page on LXD, through the API on Incus): a deleted file comes back, audited;
//! another student gets 403, a name that is not a snapshot's a 400 at `snapshot`.
//!
//! What is proven: the daemon holds the schedule, expiry and pattern on the home volume, and a
//! snapshot it makes of that volume (asked for by hand here) takes an expiry `keep` periods
//! ahead (and, on Incus, the pattern's name). The daemon's scheduler firing is
//! `home_snapshot_schedule`'s.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cohort_e2e::bodies::to_json;
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::{PortRange, TestLxd};
use cohort_proto::api::courses::CourseHomeSnapshots;
use reqwest::Method;
use serde_json::{json, Value};

/// Sends, asserts the status, returns the JSON body (or Null).
pub(crate) async fn call(
    cluster: &Cluster,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
    want: u16,
) -> Value {
    let mut req = cluster.request(method.clone(), path, token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.expect("controller answers");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    assert_eq!(status, want, "{method} {path}: {text}");
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

pub(crate) fn field(body: &Value) -> &str {
    body["error"]["field"].as_str().unwrap_or_default()
}

/// The home volume's snapshot keys as the daemon holds them (empty when unset).
fn keys(cluster: &Cluster, volume: &str) -> [String; 3] {
    [
        "snapshots.schedule",
        "snapshots.expiry",
        "snapshots.pattern",
    ]
    .map(|key| {
        cluster.nodes[0]
            .lxd
            .lxc(&["storage", "volume", "get", "cohort", volume, key])
            .trim()
            .to_string()
    })
}

async fn home_snapshots_reach_the_daemon(daemon: TestDaemon, code: &str) {
    let mut cluster = Cluster::start(0).await;
    cluster.add_node_in("node1", TestLxd::on(daemon)).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user(&format!("prof-{code}"), "instructor").await;
    let course = |extra: Value| {
        let mut body = json!({"code": code, "title": "Snapshots", "image": "cohort/base",
                              "memory_mib": 256, "disk_gib": 2});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };

    // Bad values are refused at their field, and nothing is made.
    for (extra, name) in [
        (json!({"home_snapshots": "weekly"}), "home_snapshots"),
        (
            json!({"home_snapshots": "daily", "home_snapshots_keep": 0}),
            "home_snapshots_keep",
        ),
        (json!({"home_snapshots_keep": 101}), "home_snapshots_keep"),
    ] {
        let body = call(
            &cluster,
            Method::POST,
            "/courses",
            &prof,
            Some(course(extra)),
            400,
        )
        .await;
        assert_eq!(field(&body), name, "{body}");
    }
    call(
        &cluster,
        Method::GET,
        &format!("/courses/{code}"),
        &prof,
        None,
        404,
    )
    .await;

    let made = call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(course(
            json!({"home_snapshots": "daily", "home_snapshots_keep": 3}),
        )),
        201,
    )
    .await;
    assert_eq!(made["home_snapshots"], "daily", "{made}");
    assert_eq!(made["home_snapshots_keep"], 3, "{made}");
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

    // The create gave the new home the course's schedule.
    let volume = format!("home-{code}-stu");
    assert_eq!(keys(&cluster, &volume), ["@daily", "3d", "auto%d"]);

    // A change reaches the home already made, through a retried job step.
    let path = format!("/courses/{code}/home/snapshots");
    for (body, name) in [
        (json!({"home_snapshots": "sometimes"}), "home_snapshots"),
        (json!({"home_snapshots_keep": 0}), "home_snapshots_keep"),
    ] {
        let answer = call(&cluster, Method::PUT, &path, &prof, Some(body), 400).await;
        assert_eq!(field(&answer), name, "{answer}");
    }
    let change = call(
        &cluster,
        Method::PUT,
        &path,
        &prof,
        Some(to_json(&CourseHomeSnapshots {
            home_snapshots: Some("hourly".into()),
            home_snapshots_keep: Some(24),
        })),
        200,
    )
    .await;
    assert_eq!(change["course"]["home_snapshots"], "hourly", "{change}");
    let id = change["operation"]["id"].as_str().expect("an operation");
    let done = cluster.wait_operation(id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(keys(&cluster, &volume), ["@hourly", "24H", "auto%d"]);

    // A file in the home, then a snapshot of it.
    let inst = format!("{code}-stu");
    let exec = |cmd: &str| {
        cluster.nodes[0]
            .lxd
            .lxc(&["exec", &inst, "--", "sh", "-c", cmd])
    };
    exec("echo precious > /home/stu/precious.txt && sync");
    // A snapshot of the home, asked of the daemon by hand (its scheduler would at the hour).
    // Incus named the verb `snapshot create`; LXD 5.0 has it bare.
    let mut snapshot = vec!["storage", "volume", "snapshot"];
    if matches!(daemon, TestDaemon::Incus) {
        snapshot.push("create");
    }
    snapshot.extend(["cohort", volume.as_str()]);
    cluster.nodes[0].lxd.lxc(&snapshot);
    // The student lists the home's snapshots; another student may not. The daemon gave the
    // snapshot an expiry `keep` (24) hours ahead; Incus names it by the pattern too (LXD 5.0
    // applies the pattern to scheduled snapshots only, and names this one `snap0`).
    let stu = cluster.token_for("stu").await;
    let eve = cluster.user(&format!("eve-{code}"), "student").await;
    let list_path = format!("/instances/{inst}/home/snapshots");
    let listed = call(&cluster, Method::GET, &list_path, &stu, None, 200).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let snap = listed[0]["name"].as_str().expect("a name").to_string();
    if matches!(daemon, TestDaemon::Incus) {
        assert_eq!(snap, "auto0", "{listed}");
    }
    let expires: DateTime<Utc> = listed[0]["expires_at"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no expiry: {listed}"));
    let ahead = expires - Utc::now();
    assert!(
        ahead > chrono::Duration::hours(23) && ahead <= chrono::Duration::hours(24),
        "expires in {ahead}: {listed}"
    );
    call(&cluster, Method::GET, &list_path, &eve, None, 403).await;
    // The file is deleted; a restore (by the student, whole) brings it back, and the running
    // container is running again after it. Another student gets 403, a bad name a 400.
    exec("rm /home/stu/precious.txt");
    let restore = format!("/instances/{inst}/home/restore");
    let body = Some(json!({ "snapshot": snap }));
    call(&cluster, Method::POST, &restore, &eve, body.clone(), 403).await;
    let bad = call(
        &cluster,
        Method::POST,
        &restore,
        &stu,
        Some(json!({"snapshot": "../auto0"})),
        400,
    )
    .await;
    assert_eq!(field(&bad), "snapshot", "{bad}");
    match daemon {
        // On LXD from the portal: the container's page lists the snapshot with its button.
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
            assert_eq!(
                browser
                    .count(&format!("#home-snapshots li[data-snapshot='{snap}']"))
                    .await,
                1
            );
            browser.follow(&format!("#restore-home-{snap}")).await;
        }
        // On Incus through the API, waiting for the operation.
        TestDaemon::Incus => {
            let op = call(&cluster, Method::POST, &restore, &stu, body, 202).await;
            let done = cluster
                .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(180))
                .await;
            assert_eq!(done["status"], "success", "{done}");
        }
    }
    // Back, in a running container (the restore stops it and starts it again).
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let out = cluster.nodes[0].lxd.lxc_output(&[
            "exec",
            &inst,
            "--",
            "cat",
            "/home/stu/precious.txt",
        ]);
        if out.status.success() && out.stdout == b"precious\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the file is not back: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let audit = call(
        &cluster,
        Method::GET,
        &format!("/audit?action=restore_home&object={inst}"),
        &cluster.admin_token,
        None,
        200,
    )
    .await;
    assert!(audit.to_string().contains(&snap), "{audit}");

    // Off: the daemon's schedule is gone; the course shows it.
    let change = call(
        &cluster,
        Method::PUT,
        &path,
        &prof,
        Some(to_json(&CourseHomeSnapshots {
            home_snapshots: Some("off".into()),
            home_snapshots_keep: None,
        })),
        200,
    )
    .await;
    assert_eq!(change["course"]["home_snapshots"], "off", "{change}");
    let id = change["operation"]["id"].as_str().expect("an operation");
    let done = cluster.wait_operation(id, Duration::from_secs(120)).await;
    assert_eq!(done["status"], "success", "{done}");
    assert_eq!(keys(&cluster, &volume), ["", "", ""]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn home_snapshots_reach_the_daemon_on_lxd() {
    home_snapshots_reach_the_daemon(TestDaemon::Lxd, "hslxd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn home_snapshots_reach_the_daemon_on_incus() {
    home_snapshots_reach_the_daemon(TestDaemon::Incus, "hsinc").await;
}
