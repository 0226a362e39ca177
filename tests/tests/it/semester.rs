//! Issue 45's semester, with real processes, PostgreSQL, LXD and Incus, ssh and Chromium:
//! a course's staff hold its instructor's rights but deleting it and its quota; removing a
//! student keeps their home unless asked (and a reset keeps it); `course copy` makes next
//! term's course with the old one's settings and staff and no students.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{budget, course, on_demand, to_json, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd};
use cohort_proto::api::courses::{
    CopyCourse, CourseArchiveDays, CourseJupyter, CourseLimits, CourseQuota, CourseReclaimWarning,
    Egress, NetworkPolicy,
};
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

/// Posts a roster (CSV) as `token`; asserts 200.
async fn roster(cluster: &Cluster, code: &str, token: &str, csv: String) {
    let res = cluster
        .request(Method::POST, &format!("/courses/{code}/roster"), token)
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .expect("roster");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
}

/// An operation answered by `method path`, waited for; asserts success.
async fn run_op(cluster: &Cluster, method: Method, path: &str, token: &str) {
    let body = (method == Method::POST).then(|| json!({}));
    let op = call(cluster, method, path, token, body, 202).await;
    let id = op["id"].as_str().expect("operation id");
    let done = cluster.wait_operation(id, Duration::from_secs(300)).await;
    assert_eq!(
        done["status"],
        "success",
        "{path}: {done}\n{}",
        cluster.controller_log()
    );
}

/// The field a 4xx error names.
fn field(body: &Value) -> &str {
    body["error"]["field"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staff_hold_a_courses_rights_but_deleting_it_and_its_quota() {
    let cluster = Cluster::start(0).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof-st", "instructor").await;
    let ta = cluster.user("ta-st", "instructor").await;
    let other = cluster.user("other-st", "instructor").await;
    cluster.user("pupil-st", "student").await;
    call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("st1", "Staffed", "cohort/base")
        })),
        201,
    )
    .await;
    let students = "/courses/st1/students";
    call(&cluster, Method::GET, students, &ta, None, 403).await;

    // Bad input names the field; only the course's instructor hands out its rights.
    for (who, want) in [("pupil-st", 400), ("nobody-st", 400), ("prof-st", 400)] {
        let body = call(
            &cluster,
            Method::PUT,
            &format!("/courses/st1/staff/{who}"),
            &prof,
            None,
            want,
        )
        .await;
        assert_eq!(field(&body), "username", "{body}");
    }
    call(
        &cluster,
        Method::PUT,
        "/courses/st1/staff/ta-st",
        &other,
        None,
        403,
    )
    .await;
    call(
        &cluster,
        Method::PUT,
        "/courses/st1/staff/ta-st",
        &ta,
        None,
        403,
    )
    .await;
    let course = call(
        &cluster,
        Method::PUT,
        "/courses/st1/staff/ta-st",
        &prof,
        None,
        200,
    )
    .await;
    assert_eq!(course["staff"], json!(["ta-st"]), "{course}");

    // The staff member: the course in their list, its class, roster, settings and exports.
    let theirs = call(&cluster, Method::GET, "/courses", &ta, None, 200).await;
    assert_eq!(theirs[0]["code"], "st1", "{theirs}");
    roster(
        &cluster,
        "st1",
        &ta,
        "username,name,email,ssh_key\nann-st,,,\n".into(),
    )
    .await;
    let class = call(&cluster, Method::GET, students, &ta, None, 200).await;
    assert_eq!(class[0]["username"], "ann-st", "{class}");
    for (path, body) in [
        (
            "/courses/st1/jupyter",
            to_json(&CourseJupyter { instructors: true }),
        ),
        (
            "/courses/st1/limits",
            to_json(&CourseLimits {
                cpu: Some(2),
                ..Default::default()
            }),
        ),
        (
            "/courses/st1/network",
            to_json(&NetworkPolicy {
                egress: Egress::None,
                ssh_from: vec![],
            }),
        ),
    ] {
        call(&cluster, Method::PUT, path, &ta, Some(body), 200).await;
    }
    call(
        &cluster,
        Method::GET,
        "/courses/st1/endpoints",
        &ta,
        None,
        200,
    )
    .await;

    // Not theirs: deleting the course, its quota, handing out its rights.
    call(&cluster, Method::DELETE, "/courses/st1", &ta, None, 403).await;
    call(
        &cluster,
        Method::PUT,
        "/courses/st1/quota",
        &ta,
        Some(to_json(&CourseQuota {
            max_students: Some(100),
            ..Default::default()
        })),
        403,
    )
    .await;
    call(
        &cluster,
        Method::PUT,
        "/courses/st1/staff/other-st",
        &ta,
        None,
        403,
    )
    .await;
    call(&cluster, Method::GET, students, &other, None, 403).await;
    let now = cluster.admin(Method::GET, "/courses/st1", None).await;
    assert_eq!(now["quota"]["max_students"], Value::Null, "{now}");
    assert_eq!(now["staff"], json!(["ta-st"]), "{now}");

    // Removed: the rights go at once; a second removal finds nothing.
    let course = call(
        &cluster,
        Method::DELETE,
        "/courses/st1/staff/ta-st",
        &prof,
        None,
        200,
    )
    .await;
    assert_eq!(course["staff"], json!([]), "{course}");
    call(&cluster, Method::GET, students, &ta, None, 403).await;
    call(
        &cluster,
        Method::DELETE,
        "/courses/st1/staff/ta-st",
        &prof,
        None,
        404,
    )
    .await;
    let audit = cluster
        .admin(Method::GET, "/audit?actor=prof-st&object=st1", None)
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(actions.contains(&"add_staff"), "{audit}");
    assert!(actions.contains(&"remove_staff"), "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_makes_next_terms_course_with_its_settings_and_staff_and_no_students() {
    let cluster = Cluster::start(0).await;
    cluster.import_gpu_ready_base_image("cohort/base").await;
    let prof = cluster.user("prof-cp", "instructor").await;
    let ta = cluster.user("ta-cp", "instructor").await;
    call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(to_json(&CreateCourse {
            cpu: Some(2),
            memory_mib: Some(512),
            disk_gib: Some(3),
            gpus: Some(1),
            gpu_model: Some("A100".into()),
            gpu_share: Some(4),
            processes: Some(500),
            home_mib: Some(2048),
            idle_gpu_minutes: Some(30),
            idle_action: Some("detach".into()),
            max_runtime_minutes: Some(600),
            starts: Some("2026-09-01".into()),
            network: Some(NetworkPolicy {
                egress: Egress::Allow(vec!["10.0.0.0/8:3128".into()]),
                ssh_from: vec!["192.168.0.0/16".into()],
            }),
            ..course("cp1", "Fall", "cohort/base")
        })),
        201,
    )
    .await;
    call(
        &cluster,
        Method::PUT,
        "/courses/cp1/jupyter",
        &prof,
        Some(to_json(&CourseJupyter { instructors: true })),
        200,
    )
    .await;
    // GPU time: on demand, a budget, a warning before reclaim; how long archives are kept; all
    // carried to next term.
    for (path, body) in [
        ("/courses/cp1/gpu-mode", to_json(&on_demand(3.0))),
        ("/courses/cp1/budget", to_json(&budget(12.5, "week"))),
        (
            "/courses/cp1/reclaim-warning",
            to_json(&CourseReclaimWarning { warn_minutes: 15 }),
        ),
        (
            "/courses/cp1/archive-days",
            to_json(&CourseArchiveDays { archive_days: 21 }),
        ),
    ] {
        call(&cluster, Method::PUT, path, &prof, Some(body), 200).await;
    }
    cluster
        .admin(
            Method::PUT,
            "/courses/cp1/quota",
            Some(to_json(&CourseQuota {
                max_students: Some(40),
                max_gpus: Some(10),
                max_memory_mib: None,
            })),
        )
        .await;
    call(
        &cluster,
        Method::PUT,
        "/courses/cp1/staff/ta-cp",
        &prof,
        None,
        200,
    )
    .await;
    roster(
        &cluster,
        "cp1",
        &prof,
        "username,name,email,ssh_key\nann-cp,,,\nbob-cp,,,\n".into(),
    )
    .await;

    // Refused: staff copying, a taken or bad code, a bad title; nothing made by any of them.
    let copy = "/courses/cp1/copy";
    call(
        &cluster,
        Method::POST,
        copy,
        &ta,
        Some(to_json(&CopyCourse {
            code: "cp2".into(),
            title: None,
        })),
        403,
    )
    .await;
    for (body, want, at) in [
        (json!({"code": "cp1"}), 409, "code"),
        (json!({"code": "Bad Code"}), 400, "code"),
        (
            json!({"code": "cp2", "title": "x".repeat(201)}),
            400,
            "title",
        ),
        (json!({"code": "cp2", "students": true}), 400, ""),
    ] {
        let answer = call(
            &cluster,
            Method::POST,
            copy,
            &prof,
            Some(body.clone()),
            want,
        )
        .await;
        if !at.is_empty() {
            assert_eq!(field(&answer), at, "{body}: {answer}");
        }
    }
    let all = cluster.admin(Method::GET, "/courses", None).await;
    assert_eq!(all.as_array().map(Vec::len), Some(1), "{all}");

    let made = call(
        &cluster,
        Method::POST,
        copy,
        &prof,
        Some(to_json(&CopyCourse {
            code: "cp2".into(),
            title: Some("Spring".into()),
        })),
        201,
    )
    .await;
    let old = cluster.admin(Method::GET, "/courses/cp1", None).await;
    assert_eq!(made["title"], "Spring");
    assert_eq!(made["students"], 0, "{made}");
    assert_eq!(made["starts_at"], Value::Null, "{made}");
    assert_eq!(made["staff"], json!(["ta-cp"]), "{made}");
    // Everything else as the old course has it.
    let kept = |c: &Value| {
        let mut c = c.clone();
        for gone in ["code", "title", "students", "starts_at", "ends_at", "state"] {
            c.as_object_mut().expect("course").remove(gone);
        }
        c
    };
    assert_eq!(kept(&made), kept(&old), "copied {made}\nfrom {old}");
    assert_eq!(
        (
            &made["gpu_mode"],
            &made["gpu_hours_per_student"],
            &made["warn_minutes"],
            &made["archive_days"]
        ),
        (&json!("on-demand"), &json!(12.5), &json!(15), &json!(21)),
        "{made}"
    );
    assert_eq!(old["students"], 2, "{old}");
    let class = call(
        &cluster,
        Method::GET,
        "/courses/cp2/students",
        &ta,
        None,
        200,
    )
    .await;
    assert_eq!(class, json!([]));
}

/// A one-node cluster on `daemon` with course `code` taught by `prof` with staff `ta`, whose
/// student `stu` has `key`; provisioned by the staff member. The cluster, the instructor's
/// and staff member's tokens, and the student's SSH port.
async fn staffed_course(
    daemon: TestDaemon,
    code: &str,
    key: &SshKey,
) -> (Cluster, String, String, u16) {
    let mut cluster = Cluster::start(0).await;
    cluster.add_node_in("node1", TestLxd::on(daemon)).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user(&format!("prof-{code}"), "instructor").await;
    let ta = cluster.user(&format!("ta-{code}"), "instructor").await;
    call(
        &cluster,
        Method::POST,
        "/courses",
        &prof,
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course(code, "Homes", "cohort/base")
        })),
        201,
    )
    .await;
    let staff = format!("/courses/{code}/staff/ta-{code}");
    call(&cluster, Method::PUT, &staff, &prof, None, 200).await;
    let csv = format!(
        "username,name,email,ssh_key\nstu,Stu,,{}\n",
        key.public_key()
    );
    roster(&cluster, code, &ta, csv).await;
    run_op(
        &cluster,
        Method::POST,
        &format!("/courses/{code}/provision"),
        &ta,
    )
    .await;
    let class = call(
        &cluster,
        Method::GET,
        &format!("/courses/{code}/students"),
        &ta,
        None,
        200,
    )
    .await;
    let port = class[0]["ssh_port"].as_u64().expect("ssh port") as u16;
    (cluster, prof, ta, port)
}

fn in_home(key: &SshKey, port: u16, cmd: &str) -> String {
    key.forget_hosts();
    let out = key.run_when_up("127.0.0.1", port, "stu", cmd, Duration::from_secs(90));
    assert!(
        out.status.success(),
        "login refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn home_volumes(cluster: &Cluster) -> String {
    cluster.nodes[0].lxd.lxc(&[
        "storage", "volume", "list", "cohort", "-f", "csv", "-c", "tn",
    ])
}

/// Waits (up to 90 s) until instance `name` is gone from the controller and the node.
async fn gone(cluster: &Cluster, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let res = cluster
            .request(
                Method::GET,
                &format!("/instances/{name}"),
                &cluster.admin_token,
            )
            .send()
            .await
            .expect("controller answers");
        if res.status() == 404 && cluster.nodes[0].lxd.instance_names().is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is still there");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Reset and removal, by a staff member: a reset keeps the home; a removal from the portal
/// (box unticked) keeps it for a later enrolment; a removal with `delete_home` deletes it.
async fn remove_and_reset_keep_the_home_unless_asked(daemon: TestDaemon, code: &str) {
    let key = SshKey::generate();
    let (cluster, _prof, ta, port) = staffed_course(daemon, code, &key).await;
    let other = cluster.user(&format!("other-{code}"), "instructor").await;
    let volume = format!("custom,home-{code}-stu");
    in_home(&key, port, "echo kept > ~/keep.txt");
    assert!(home_volumes(&cluster).contains(&volume));

    // The instance routes let the staff member in (one rule), not another instructor.
    let instance = format!("/instances/{code}-stu");
    call(&cluster, Method::GET, &instance, &ta, None, 200).await;
    call(&cluster, Method::GET, &instance, &other, None, 403).await;

    // Reset re-creates the container; the home is kept.
    let student = format!("/courses/{code}/students/stu");
    run_op(&cluster, Method::POST, &format!("{student}/reset"), &ta).await;
    assert_eq!(in_home(&key, port, "cat ~/keep.txt"), "kept\n");

    // The staff member sees the course in the portal and removes the student, box unticked.
    let state = cluster.state.path().join("controller");
    let ta_name = format!("ta-{code}");
    set_portal_password(&cluster.db_url, &state, &ta_name, "the TA's long password");
    let base = cluster.controller.url();
    let browser = Browser::start(PortRange::claim().port(1), "en").await;
    browser
        .sign_in(&base, &ta_name, "the TA's long password")
        .await;
    browser.goto(&format!("{base}/courses")).await;
    assert_eq!(
        browser
            .count(&format!("#courses a[href='/courses/{code}']"))
            .await,
        1
    );
    browser.goto(&format!("{base}{student}")).await;
    browser.follow("#remove-student").await;
    gone(&cluster, &format!("{code}-stu")).await;
    let class = format!("/courses/{code}/students");
    assert_eq!(
        call(&cluster, Method::GET, &class, &ta, None, 200).await,
        json!([])
    );
    assert!(
        home_volumes(&cluster).contains(&volume),
        "{}",
        home_volumes(&cluster)
    );

    // Enrolled again, the student finds their work.
    roster(
        &cluster,
        code,
        &ta,
        "username,name,email,ssh_key\nstu,,,\n".into(),
    )
    .await;
    run_op(
        &cluster,
        Method::POST,
        &format!("/courses/{code}/provision"),
        &ta,
    )
    .await;
    let again = call(&cluster, Method::GET, &class, &ta, None, 200).await;
    let port = again[0]["ssh_port"].as_u64().expect("ssh port") as u16;
    assert_eq!(in_home(&key, port, "cat ~/keep.txt"), "kept\n");

    // A bad flag is refused at its name and changes nothing; delete_home=true deletes it.
    let body = call(
        &cluster,
        Method::DELETE,
        &format!("{student}?delete_home=maybe"),
        &ta,
        None,
        400,
    )
    .await;
    assert_eq!(field(&body), "delete_home", "{body}");
    assert_eq!(cluster.nodes[0].lxd.instance_names().len(), 1);
    run_op(
        &cluster,
        Method::DELETE,
        &format!("{student}?delete_home=true"),
        &ta,
    )
    .await;
    assert!(cluster.nodes[0].lxd.instance_names().is_empty());
    let left = home_volumes(&cluster);
    assert!(!left.contains(&volume), "{left}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remove_and_reset_keep_the_home_unless_asked_on_lxd() {
    remove_and_reset_keep_the_home_unless_asked(TestDaemon::Lxd, "rmlxd").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn remove_and_reset_keep_the_home_unless_asked_on_incus() {
    remove_and_reset_keep_the_home_unless_asked(TestDaemon::Incus, "rminc").await;
}

/// The CLI's verbs: `course staff add|rm` prints the staff, `course copy` the new code, and each
/// refusal names the field.
#[test]
fn the_cli_names_staff_and_copies_a_course() {
    let controller = crate::cli_support::Controller::start();
    let cli = crate::cli_support::Cli::admin_of(&controller);
    let tarball = crate::cli_support::base_image_tarball();
    let tarball = tarball.to_str().expect("path");
    cli.ok(&["-q", "image", "import", tarball, "--alias", "cohort/base"]);
    cli.ok(&["user", "create", "ta-cli", "--role", "instructor"]);
    cli.ok(&["user", "create", "pupil-cli", "--role", "student"]);
    let create = ["course", "create", "cl1", "--title", "Term one"];
    cli.ok(&[&create[..], &["--image", "cohort/base", "--disk", "2GiB"]].concat());
    assert_eq!(
        cli.ok(&["course", "staff", "add", "cl1", "ta-cli"]),
        "ta-cli\n"
    );
    cli.fails(
        &["course", "staff", "add", "cl1", "pupil-cli"],
        "(field: username)",
    );
    assert_eq!(
        cli.ok(&["course", "copy", "cl1", "cl2", "--title", "Term two"]),
        "cl2\n"
    );
    let shown = cli.ok(&["course", "show", "cl2"]);
    assert!(shown.contains("title: Term two\n"), "{shown}");
    assert!(shown.contains("staff:\n- ta-cli\n"), "{shown}");
    cli.fails(&["course", "copy", "cl1", "cl2"], "(field: code)");
    assert_eq!(cli.ok(&["course", "staff", "rm", "cl2", "ta-cli"]), "\n");
    cli.fails(
        &[
            "course",
            "student",
            "remove",
            "cl1",
            "nobody",
            "--delete-home",
            "--force",
        ],
        "student nobody in course cl1",
    );
}
