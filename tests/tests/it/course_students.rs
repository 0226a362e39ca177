//! Issue 5's per-student follow-ups, with real processes, LXD and ssh: a student's SSH key
//! added or removed through `/me/ssh-keys` reaches their running container at once (and a
//! stopped one when it next starts), and `teardown --delete` deletes the home volumes unless
//! `--keep-homes`, which a later re-provision finds again, on the node that holds it.

use std::time::Duration;

use cohort_e2e::bodies::{course, new_user, teardown, to_json, CreateCourse, Role};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::users::AddSshKey;
use reqwest::Method;
use serde_json::{json, Value};

/// Sends, asserts the status, returns the JSON body (or Null).
async fn call(
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

/// An operation started by `path`, waited for; asserts success.
async fn run_op(cluster: &Cluster, path: &str, token: &str, body: Value) {
    let op = call(cluster, Method::POST, path, token, Some(body), 202).await;
    let id = op["id"].as_str().expect("operation id");
    let done = cluster.wait_operation(id, Duration::from_secs(600)).await;
    assert_eq!(
        done["status"],
        "success",
        "{path}: {done}\n{}",
        cluster.controller_log()
    );
}

/// A one-node cluster with course `code` whose single student `stu` has `key`; provisioned.
/// Returns the cluster, the instructor's token and the student's SSH port.
async fn one_student(code: &str, key: &SshKey) -> (Cluster, String, u16) {
    one_student_on(code, key, 1).await
}

/// [`one_student`] on a cluster of `nodes` nodes.
async fn one_student_on(code: &str, key: &SshKey, nodes: usize) -> (Cluster, String, u16) {
    let cluster = Cluster::start(nodes).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user(&format!("prof-{code}"), "instructor").await;
    call(
        &cluster,
        Method::POST,
        "/courses",
        &teacher,
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course(code, "Follow-ups", "cohort/base")
        })),
        201,
    )
    .await;
    let res = cluster
        .request(Method::POST, &format!("/courses/{code}/roster"), &teacher)
        .header("content-type", "text/csv")
        .body(format!(
            "username,name,email,ssh_key\nstu,Stu,,{}\n",
            key.public_key()
        ))
        .send()
        .await
        .expect("roster");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    run_op(
        &cluster,
        &format!("/courses/{code}/provision"),
        &teacher,
        json!({}),
    )
    .await;
    let students = students(&cluster, code, &teacher).await;
    let port = students[0]["ssh_port"].as_u64().expect("ssh port") as u16;
    (cluster, teacher, port)
}

/// The course's students as its instructor `token` sees them.
async fn students(cluster: &Cluster, code: &str, token: &str) -> Value {
    let path = format!("/courses/{code}/students");
    call(cluster, Method::GET, &path, token, None, 200).await
}

fn logs_in(key: &SshKey, port: u16, cmd: &str) -> String {
    let out = key.run_when_up("127.0.0.1", port, "stu", cmd, Duration::from_secs(180));
    assert!(
        out.status.success(),
        "login refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(key: &SshKey, port: u16) {
    let out = key.run("127.0.0.1", port, "stu", "true");
    assert_eq!(
        out.status.code(),
        Some(255),
        "the key still opens the container"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_students_key_changes_reach_their_containers() {
    let first = SshKey::generate();
    let (cluster, teacher, port) = one_student("keys1", &first).await;
    let student = cluster.token_for("stu").await;
    assert_eq!(logs_in(&first, port, "whoami"), "stu\n");

    // A second key opens the running container as soon as it is added.
    let second = SshKey::generate();
    refused(&second, port);
    call(
        &cluster,
        Method::POST,
        "/me/ssh-keys",
        &student,
        Some(to_json(&AddSshKey {
            public_key: second.public_key(),
        })),
        201,
    )
    .await;
    assert_eq!(logs_in(&second, port, "whoami"), "stu\n");

    // Removing the first shuts it out; the second still works.
    let me = call(&cluster, Method::GET, "/me", &student, None, 200).await;
    let first_id = me["ssh_keys"]
        .as_array()
        .expect("keys")
        .iter()
        .find(|k| k["public_key"].as_str() == Some(first.public_key().trim()))
        .and_then(|k| k["id"].as_i64())
        .expect("the first key's id");
    call(
        &cluster,
        Method::DELETE,
        &format!("/me/ssh-keys/{first_id}"),
        &student,
        None,
        204,
    )
    .await;
    refused(&first, port);
    assert_eq!(logs_in(&second, port, "whoami"), "stu\n");

    // A key added while the container is stopped works once it starts again.
    run_op(
        &cluster,
        "/courses/keys1/students/stu/stop",
        &teacher,
        json!({}),
    )
    .await;
    let third = SshKey::generate();
    call(
        &cluster,
        Method::POST,
        "/me/ssh-keys",
        &student,
        Some(to_json(&AddSshKey {
            public_key: third.public_key(),
        })),
        201,
    )
    .await;
    run_op(
        &cluster,
        "/courses/keys1/students/stu/start",
        &teacher,
        json!({}),
    )
    .await;
    assert_eq!(logs_in(&third, port, "whoami"), "stu\n");
    refused(&first, port);
}

fn volumes(cluster: &Cluster) -> String {
    cluster.nodes[0].lxd.lxc(&[
        "storage", "volume", "list", "cohort", "-f", "csv", "-c", "tn",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_delete_removes_home_volumes_unless_kept() {
    let key = SshKey::generate();
    let (cluster, teacher, port) = one_student("homes1", &key).await;
    logs_in(&key, port, "echo kept > ~/keep.txt");
    assert!(volumes(&cluster).contains("custom,home-homes1-stu"));

    // --keep-homes: the container goes, the volume stays, and a re-provision finds the file.
    run_op(
        &cluster,
        "/courses/homes1/teardown",
        &teacher,
        to_json(&teardown(true, true)),
    )
    .await;
    assert_eq!(
        cluster.nodes[0].lxd.lxc(&["list", "-f", "csv", "-c", "n"]),
        ""
    );
    assert!(volumes(&cluster).contains("custom,home-homes1-stu"));
    run_op(&cluster, "/courses/homes1/provision", &teacher, json!({})).await;
    key.forget_hosts();
    // The new container's port is the one the placement gives it now, not necessarily the old.
    let students = students(&cluster, "homes1", &teacher).await;
    let port = students[0]["ssh_port"].as_u64().expect("ssh port") as u16;
    assert_eq!(logs_in(&key, port, "cat ~/keep.txt"), "kept\n");

    // Plain --delete: the volume goes too.
    run_op(
        &cluster,
        "/courses/homes1/teardown",
        &teacher,
        to_json(&teardown(true, false)),
    )
    .await;
    assert_eq!(
        cluster.nodes[0].lxd.lxc(&["list", "-f", "csv", "-c", "n"]),
        ""
    );
    let left = volumes(&cluster);
    assert!(!left.contains("home-homes1-stu"), "{left}");
}

/// Issue 46: a home kept by a teardown outlives its container; when the re-provisioned container
/// is still queued (its node cordoned) and the course is torn down with `--delete`, the home goes
/// too, though the queued instance names no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_queued_students_kept_home_goes_with_a_deleting_teardown() {
    let key = SshKey::generate();
    let (cluster, teacher, _port) = one_student("homes2", &key).await;
    run_op(
        &cluster,
        "/courses/homes2/teardown",
        &teacher,
        to_json(&teardown(true, true)),
    )
    .await;
    assert!(volumes(&cluster).contains("custom,home-homes2-stu"));
    cluster
        .admin(Method::POST, "/nodes/node1/cordon", None)
        .await;
    let op = call(
        &cluster,
        Method::POST,
        "/courses/homes2/provision",
        &teacher,
        Some(json!({})),
        202,
    )
    .await;
    // Queued: the student's instance has no node while node1 is cordoned.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let students = students(&cluster, "homes2", &teacher).await;
        if students[0]["state"] == "queued" || students[0]["queue_reason"].is_string() {
            assert!(students[0]["node"].is_null(), "{students}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never queued: {students} ({op})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    run_op(
        &cluster,
        "/courses/homes2/teardown",
        &teacher,
        to_json(&teardown(true, false)),
    )
    .await;
    let left = volumes(&cluster);
    assert!(!left.contains("home-homes2-stu"), "{left}");
}

/// Issue 46: a kept home brings its student's next container back to the node that holds it.
/// With two nodes and the home's node cordoned, a re-provision waits for that node, saying why,
/// instead of making a new, empty home on the other; once the node is back the container is
/// placed there and the student finds their files.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kept_home_brings_its_student_back_to_its_node() {
    let key = SshKey::generate();
    let (cluster, teacher, port) = one_student_on("homes3", &key, 2).await;
    logs_in(&key, port, "echo mine > ~/keep.txt");
    let list = students(&cluster, "homes3", &teacher).await;
    let home_node = list[0]["node"]
        .as_str()
        .expect("placed on a node")
        .to_string();
    run_op(
        &cluster,
        "/courses/homes3/teardown",
        &teacher,
        to_json(&teardown(true, true)),
    )
    .await;
    cluster
        .admin(Method::POST, &format!("/nodes/{home_node}/cordon"), None)
        .await;
    call(
        &cluster,
        Method::POST,
        "/courses/homes3/provision",
        &teacher,
        Some(json!({})),
        202,
    )
    .await;
    // Queued for the home's node, though the other node has room.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let list = students(&cluster, "homes3", &teacher).await;
        assert!(
            list[0]["node"].is_null(),
            "placed away from its kept home: {list}"
        );
        let why = list[0]["queue_reason"].as_str().unwrap_or_default();
        if why.contains(&format!("its kept home is on node {home_node}")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never queued for its home's node: {list}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let back = cluster
        .admin(Method::POST, &format!("/nodes/{home_node}/restore"), None)
        .await;
    cluster
        .wait_operation(
            back["id"].as_str().expect("operation"),
            Duration::from_secs(120),
        )
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    let port = loop {
        let list = students(&cluster, "homes3", &teacher).await;
        // Made and running, its key in place: a port alone comes with placement, before the
        // container is made.
        let running = list[0]["state"] == "running";
        if let Some(port) = list[0]["ssh_port"].as_u64().filter(|_| running) {
            assert_eq!(list[0]["node"], home_node.as_str(), "{list}");
            break port as u16;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never placed once its node was back: {list}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    key.forget_hosts();
    assert_eq!(logs_in(&key, port, "cat ~/keep.txt"), "mine\n");
}

/// The critical attack of issue 25: instructor B lists instructor A's student in B's own roster
/// with B's key. A roster gives credentials only to accounts it creates, so after a routine
/// restart of the student's container in A's course B's key is refused there (and in B's own
/// course), the student's own key still works, an existing account with no credentials gets no
/// generated password, and B's report and the audit log say the key was ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roster_never_gives_credentials_to_an_account_it_did_not_create() {
    let own = SshKey::generate();
    let (cluster, teacher_a, port) = one_student("victim1", &own).await;
    cluster
        .admin(
            Method::POST,
            "/users",
            Some(to_json(&new_user("bare", Role::Student))),
        )
        .await;
    let intruder = SshKey::generate();
    let teacher_b = cluster.user("prof-other1", "instructor").await;
    call(
        &cluster,
        Method::POST,
        "/courses",
        &teacher_b,
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("other1", "Takeover", "cohort/base")
        })),
        201,
    )
    .await;
    let res = cluster
        .request(Method::POST, "/courses/other1/roster", &teacher_b)
        .header("content-type", "text/csv")
        .body(format!(
            "username,name,email,ssh_key\nstu,Stu,,{key}\nbare,,,\nnewbie,,,{key}\n",
            key = intruder.public_key()
        ))
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 200);
    let report: Value = res.json().await.expect("report");
    assert_eq!(
        report["added"],
        json!(["stu", "bare", "newbie"]),
        "{report}"
    );
    assert_eq!(report["passwords_generated"], json!([]), "{report}");
    assert_eq!(
        report["existing_accounts"],
        json!([
            {"username": "stu", "roster_key_ignored": true, "without_credentials": false},
            {"username": "bare", "roster_key_ignored": false, "without_credentials": true},
        ]),
        "{report}"
    );

    // The routine restart that used to carry B's key into A's container.
    run_op(
        &cluster,
        "/courses/victim1/students/stu/restart",
        &teacher_a,
        json!({}),
    )
    .await;
    refused(&intruder, port);
    assert_eq!(logs_in(&own, port, "whoami"), "stu\n");

    // B's own container for the student carries the student's key, not B's.
    run_op(&cluster, "/courses/other1/provision", &teacher_b, json!({})).await;
    let students = students(&cluster, "other1", &teacher_b).await;
    let port_b = students
        .as_array()
        .expect("students")
        .iter()
        .find(|s| s["username"] == "stu")
        .and_then(|s| s["ssh_port"].as_u64())
        .expect("stu's port in other1") as u16;
    refused(&intruder, port_b);
    assert_eq!(logs_in(&own, port_b, "whoami"), "stu\n");

    let audit = cluster
        .admin(Method::GET, "/audit?actor=prof-other1&object=stu", None)
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"roster_key_ignored"), "{audit}");
}
