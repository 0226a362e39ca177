//! Issue 25 against real LXD (btrfs pool), a real controller and a real agent: what a hostile
//! student did to a running Cohort, each reproduced and now refused. Snapshots are bounded in
//! count and in space and only an instructor schedules them (with an expiry); a course name
//! taken before the course exists is named round; a create that fails on the node shows why
//! and frees its port and capacity, leaving a container Cohort did not make alone; a request no
//! node can ever hold is refused; and setuid, setgid and sticky bits arrive as pushed.
//!
//! One test, one cluster: the agent's snapshot limit comes from the environment it inherits.

use std::time::Duration;

use base64::Engine;
use cohort_e2e::bodies::{course, instance, limits, to_json, CreateCourse, CreateInstance};
use cohort_e2e::cluster::Cluster;
use reqwest::Method;
use serde_json::{json, Value};

/// The agent's `max_snapshots` in this test.
const MAX_SNAPSHOTS: usize = 3;

/// Sends; the status and the JSON body (Null when there is none).
async fn call(
    cluster: &Cluster,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = cluster.request(method, path, token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.expect("controller answers");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Runs `command` in `instance` as `token`; its stdout (asserting it exited 0).
/// Whether the node's btrfs pool accounts quotas in simple mode (its `qgroups/mode` in sysfs).
fn simple_quotas(lxd: &cohort_e2e::TestLxd) -> bool {
    let pool = format!("{}/storage-pools/cohort", lxd.daemon().dir());
    let out = std::process::Command::new("findmnt")
        .args(["-no", "UUID", "--target", &pool])
        .output()
        .expect("findmnt");
    let uuid = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::read_to_string(format!("/sys/fs/btrfs/{uuid}/qgroups/mode"))
        .is_ok_and(|mode| mode.trim() == "squota")
}

async fn exec(cluster: &Cluster, token: &str, instance: &str, command: &[&str]) -> String {
    let (status, out) = call(
        cluster,
        Method::POST,
        &format!("/instances/{instance}/exec"),
        token,
        Some(json!({ "command": command })),
    )
    .await;
    assert_eq!(status, 200, "exec {command:?}: {out}");
    let b64 = base64::engine::general_purpose::STANDARD;
    let stdout = b64.decode(out["stdout_base64"].as_str().unwrap()).unwrap();
    let stderr = b64.decode(out["stderr_base64"].as_str().unwrap()).unwrap();
    assert_eq!(
        out["exit_code"],
        0,
        "{command:?}: {}",
        String::from_utf8_lossy(&stderr)
    );
    String::from_utf8_lossy(&stdout).trim().to_string()
}

async fn wait_op(cluster: &Cluster, op: &Value) -> Value {
    let id = op["id"]
        .as_str()
        .unwrap_or_else(|| panic!("an operation: {op}"));
    cluster.wait_operation(id, Duration::from_secs(600)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_student_is_bounded_on_a_real_node() {
    let _alone = crate::alone().await;
    // Read by the agent the cluster starts (`COHORT_AGENT_MAX_SNAPSHOTS`): this test binary
    // holds this one test alone.
    std::env::set_var("COHORT_AGENT_MAX_SNAPSHOTS", MAX_SNAPSHOTS.to_string());
    let cluster = Cluster::start(1).await;
    cluster.import_gpu_ready_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    let carol = cluster.user("carol", "student").await;
    cluster.user("erin", "student").await;
    let mallory = cluster.user("mallory", "student").await;
    let dave = cluster.user("dave", "student").await;

    // A squatter takes erin's name before the course exists.
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/instances",
        &mallory,
        Some(to_json(&CreateInstance {
            limits: Some(limits(1, 256, 2)),
            start: false,
            ..instance("cs101-erin", "cohort/base")
        })),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let squat = wait_op(&cluster, &body).await;
    assert_eq!(squat["status"], "success", "{squat}");

    let (status, body) = call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(to_json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("cs101", "Systems", "cohort/base")
        })),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let res = cluster
        .request(Method::POST, "/courses/cs101/roster", &prof)
        .header("content-type", "text/csv")
        .body("username,name,email,ssh_key\ncarol,Carol,,\nerin,Erin,,\n")
        .send()
        .await
        .expect("roster");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let id = cluster.start_provision("cs101", &prof).await;
    let provisioned = cluster.wait_operation(&id, Duration::from_secs(600)).await;
    assert_eq!(
        provisioned["status"],
        "success",
        "{provisioned}\n{}",
        cluster.controller_log()
    );
    let lxd = &cluster.nodes[0].lxd;
    let names = lxd.instance_names();
    for name in ["cs101-carol", "cs101-erin"] {
        assert!(names.iter().any(|n| n == name), "{name} not in {names:?}");
    }
    // Erin's own, around the squatted name: random past `-x-` (issue 47, item 16).
    assert!(
        names.iter().any(|n| n.starts_with("cs101-erin-x-")),
        "no name around cs101-erin in {names:?}"
    );
    // The course's names are its own now.
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/instances",
        &mallory,
        Some(json!({"name": "cs101-zed", "image": "cohort/base", "start": false})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (409, &json!("name")),
        "{body}"
    );

    // setuid, setgid and sticky bits arrive as pushed (4755 arrived as 0223).
    for (path, mode) in [
        ("/usr/local/bin/suid", "4755"),
        ("/usr/local/bin/sgid", "2755"),
        ("/srv/sticky", "1777"),
        ("/srv/plain", "0640"),
    ] {
        let res = cluster
            .request(
                Method::PUT,
                &format!("/instances/cs101-carol/files?path={path}"),
                &carol,
            )
            .header("X-Cohort-Mode", mode)
            .body("#!/bin/sh\necho hi\n")
            .send()
            .await
            .expect("push");
        assert!(
            res.status().is_success(),
            "{path}: {}",
            res.text().await.unwrap_or_default()
        );
        let got = exec(
            &cluster,
            &carol,
            "cs101-carol",
            &["stat", "-c", "%04a", path],
        )
        .await;
        assert_eq!(got, mode, "{path}");
    }

    // Snapshot keys: never a student's; an instructor's schedule at most hourly, with an expiry.
    let patch = |token: &str, config: Value| {
        let token = token.to_string();
        let cluster = &cluster;
        async move {
            call(
                cluster,
                Method::PATCH,
                "/instances/cs101-carol",
                &token,
                Some(json!({ "config": config })),
            )
            .await
        }
    };
    let (status, body) = patch(&carol, json!({"snapshots.schedule": "* * * * *"})).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = patch(&prof, json!({"snapshots.schedule": "* * * * *"})).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("config.snapshots.schedule")),
        "{body}"
    );
    let (status, body) = patch(&prof, json!({"snapshots.schedule": "@daily"})).await;
    assert_eq!(status, 200, "{body}");
    let live = lxd.lxc(&["config", "get", "cs101-carol", "snapshots.expiry"]);
    assert_eq!(
        live.trim(),
        "7d",
        "a schedule without an expiry got the default one"
    );

    // Snapshots: at most MAX_SNAPSHOTS, then a 409.
    let snap = |name: String| {
        let (cluster, carol) = (&cluster, carol.clone());
        async move {
            call(
                cluster,
                Method::POST,
                "/instances/cs101-carol/snapshots",
                &carol,
                Some(json!({ "name": name })),
            )
            .await
        }
    };
    for i in 0..MAX_SNAPSHOTS {
        let (status, body) = snap(format!("s{i}")).await;
        assert!(status < 300, "snapshot {i}: {status} {body}");
    }
    let (status, body) = snap("one-too-many".into()).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the most an instance may have (3)"),
        "{body}"
    );

    // Space: what snapshots pin may not exceed the 2 GiB root quota. 900 MiB are written.
    for i in 1..MAX_SNAPSHOTS {
        let (status, body) = call(
            &cluster,
            Method::DELETE,
            &format!("/instances/cs101-carol/snapshots/s{i}"),
            &carol,
            None,
        )
        .await;
        assert!(status < 300, "delete s{i}: {status} {body}");
    }
    exec(
        &cluster,
        &carol,
        "cs101-carol",
        &[
            "sh",
            "-c",
            "dd if=/dev/urandom of=/root/big bs=1M count=900 status=none && sync",
        ],
    )
    .await;
    let (status, body) = snap("after-big".into()).await;
    if simple_quotas(lxd) {
        // With simple quotas (scripts/setup) every extent stays charged to the container that
        // wrote it while anything references it: the snapshot is taken, and the 900 MiB it keeps
        // after the file is deleted still count, so 1200 MiB more do not fit.
        assert_eq!(status, 201, "{body}");
        let wrote = exec(
            &cluster,
            &carol,
            "cs101-carol",
            &[
                "sh",
                "-c",
                "rm /root/big && sync && dd if=/dev/zero of=/root/more bs=1M count=1200 2>&1; \
                 sync; rm -f /root/more",
            ],
        )
        .await;
        assert!(wrote.contains("Disk quota exceeded"), "{wrote}");
        let (status, body) = call(
            &cluster,
            Method::DELETE,
            "/instances/cs101-carol/snapshots/after-big",
            &carol,
            None,
        )
        .await;
        assert!(status < 300, "delete after-big: {status} {body}");
    } else {
        // With full qgroups the snapshot is charged apart from the root, so the agent refuses
        // one that would pin more than the quota; the snapshots left count against it.
        assert_eq!(status, 409, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("no room for another snapshot"),
            "{message}"
        );
    }
    let snaps: Value = call(
        &cluster,
        Method::GET,
        "/instances/cs101-carol/snapshots",
        &carol,
        None,
    )
    .await
    .1;
    assert_eq!(snaps.as_array().map(Vec::len), Some(1), "{snaps}");

    // A request no node can ever hold (a GPU on a node without one) is refused, not queued.
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/instances",
        &carol,
        Some(json!({"name": "carol-gpu", "image": "cohort/base", "gpus": 1})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (409, &json!("gpus")),
        "{body}"
    );

    // A create the node refuses (a container of that name Cohort did not make) fails visibly
    // and frees what it held; the other container is left alone.
    lxd.lxc_create(&["init", "cohort/base", "dave-box"]);
    let before: Value = call(
        &cluster,
        Method::GET,
        "/nodes/node1",
        &cluster.admin_token,
        None,
    )
    .await
    .1;
    let (status, body) = call(
        &cluster,
        Method::POST,
        "/instances",
        &dave,
        Some(to_json(&CreateInstance {
            limits: Some(limits(1, 256, 2)),
            ..instance("dave-box", "cohort/base")
        })),
    )
    .await;
    assert_eq!(status, 202, "{body}");
    let failed = wait_op(&cluster, &body).await;
    assert_eq!(failed["status"], "failure", "{failed}");
    let (_, shown) = call(&cluster, Method::GET, "/instances/dave-box", &dave, None).await;
    assert_eq!(shown["observed_state"], "error", "{shown}");
    assert!(
        shown["error"]
            .as_str()
            .unwrap_or_default()
            .contains("already exists"),
        "{shown}"
    );
    assert!(
        shown["ssh_port"].is_null() && shown["node"].is_null(),
        "still holds: {shown}"
    );
    let after: Value = call(
        &cluster,
        Method::GET,
        "/nodes/node1",
        &cluster.admin_token,
        None,
    )
    .await
    .1;
    assert_eq!(
        after["instances"], before["instances"],
        "{before} -> {after}"
    );
    assert!(
        lxd.instance_names().iter().any(|n| n == "dave-box"),
        "the foreign container went"
    );
    let (status, body) = call(&cluster, Method::DELETE, "/instances/dave-box", &dave, None).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(wait_op(&cluster, &body).await["status"], "success");
    assert!(
        lxd.instance_names().iter().any(|n| n == "dave-box"),
        "deleting the row took the foreign container"
    );
}
