//! Issue 25, the controller's rules against a hostile student or instructor, on the real
//! database through the REST API: course names are reserved and a squatted name fails only its
//! student's item; instructors create instances only for their own students; a request no node
//! can ever hold is refused with the reason while one that may fit later still queues; and an
//! operation whose steps were cancelled does not report success.

use std::time::{Duration, Instant};

use actix_web::{test, web, App};
use cohort_controller::courses::naming;
use cohort_controller::db::models::enrollment::Enrollment;
use cohort_controller::db::schema::{courses, instances, operation_items};
use cohort_controller::http::api;
use cohort_controller::jobs::worker;
use cohort_e2e::bodies::{course, to_json, CreateCourse};
use cohort_e2e::controller::TestController;
use diesel::prelude::*;
use serde_json::{json, Value};

/// Sends one request with `token`: the status and the JSON body (Null when there is none).
macro_rules! call {
    ($app:expr, $token:expr, $method:expr, $path:expr, $body:expr) => {{
        let mut req = test::TestRequest::default()
            .method($method.parse().unwrap())
            .uri($path)
            .insert_header(("Authorization", format!("Bearer {}", $token)));
        let body: Option<Value> = $body;
        if let Some(body) = body {
            req = req.set_json(body);
        }
        let resp = test::call_service($app, req.to_request()).await;
        let status = resp.status().as_u16();
        let bytes = test::read_body(resp).await;
        (
            status,
            serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        )
    }};
}

fn instance(name: &str, owner: Option<&str>) -> Value {
    let mut body = json!({"name": name, "image": "base", "start": false,
                          "limits": {"cpu": 1, "memory_mib": 256, "disk_gib": 1}});
    if let Some(owner) = owner {
        body["owner"] = owner.into();
    }
    body
}

fn course_id(t: &TestController, code: &str) -> i64 {
    courses::table
        .filter(courses::code.eq(code))
        .select(courses::id)
        .first(&mut t.conn())
        .unwrap()
}

#[actix_web::test]
async fn course_names_are_reserved_and_a_squatter_takes_no_students_name() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (prof, prof_token) = t.user("prof", "instructor");
    let (_, other_prof) = t.user("prof2", "instructor");
    let (_, mallory) = t.user("mallory", "student");
    let (_, eve) = t.user("eve", "student");
    let mut students = Vec::new();
    for name in ["alice", "bob", "carol"] {
        students.push(t.user(name, "student").0);
    }
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;

    // Before the course exists, two students take three of its names: alice's plain one and a
    // guess at the name she would get around it (issue 47, item 16: that name is random now, so
    // the guess takes nothing of hers), and bob's plain one.
    let alice_around = "cs101-alice-x-4c1d0e2f";
    for (token, name) in [
        (&mallory, "cs101-alice"),
        (&mallory, alice_around),
        (&eve, "cs101-bob"),
    ] {
        let (status, body) = call!(
            &app,
            token,
            "POST",
            "/api/v1/instances",
            Some(instance(name, None))
        );
        assert_eq!(status, 202, "{name}: {body}");
    }

    let (status, body) = call!(
        &app,
        &prof_token,
        "POST",
        "/api/v1/courses",
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(1),
            ..course("cs101", "Systems", "base")
        }))
    );
    assert_eq!(status, 201, "{body}");
    let course = course_id(&t, "cs101");
    for student in &students {
        Enrollment::insert(&mut t.conn(), course, student.user.id, None).unwrap();
    }

    // Now the course's names are its own: no student and no other instructor takes one.
    for (token, who) in [(&eve, "student"), (&other_prof, "another instructor")] {
        let (status, body) = call!(
            &app,
            token,
            "POST",
            "/api/v1/instances",
            Some(instance("cs101-carol", None))
        );
        assert_eq!(status, 409, "{who}: {body}");
        assert_eq!(body["error"]["field"], "name", "{who}: {body}");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("reserved for course cs101"));
    }
    let (status, body) = call!(
        &app,
        &eve,
        "POST",
        "/api/v1/instances",
        Some(instance("cs1015-x", None))
    );
    assert_eq!(
        status, 202,
        "a name that only starts like the code is free: {body}"
    );

    // Provisioning goes round both squatters: alice and bob get names of their own.
    let (status, op) = call!(
        &app,
        &prof_token,
        "POST",
        "/api/v1/courses/cs101/provision",
        None
    );
    assert_eq!(status, 202, "{op}");
    let mut conn = t.conn();
    let theirs: Vec<(String, String)> = instances::table
        .inner_join(cohort_controller::db::schema::users::table)
        .filter(instances::course_id.eq(course))
        .select((
            cohort_controller::db::schema::users::username,
            instances::name,
        ))
        .order(cohort_controller::db::schema::users::username)
        .load(&mut conn)
        .unwrap();
    let users: Vec<&str> = theirs.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(users, ["alice", "bob", "carol"], "{theirs:?}");
    assert!(
        theirs[0].1.starts_with("cs101-alice-x-") && theirs[0].1 != alice_around,
        "{theirs:?}"
    );
    assert!(theirs[1].1.starts_with("cs101-bob-x-"), "{theirs:?}");
    assert_eq!(theirs[2].1, "cs101-carol");
    let items: Vec<(String, String, Option<String>)> = operation_items::table
        .filter(
            operation_items::operation_id
                .eq(uuid::Uuid::parse_str(op["id"].as_str().unwrap()).unwrap()),
        )
        .select((
            operation_items::target,
            operation_items::status,
            operation_items::error,
        ))
        .order(operation_items::position)
        .load(&mut conn)
        .unwrap();
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items.iter().all(|(_, s, _)| s == "pending"), "{items:?}");
    drop(prof);

    // The admin may still name anything.
    let (status, body) = call!(
        &app,
        &admin,
        "POST",
        "/api/v1/instances",
        Some(instance("cs101-spare", None))
    );
    assert_eq!(status, 202, "{body}");
}

#[actix_web::test]
async fn instructors_create_instances_only_for_their_own_students() {
    let t = TestController::new();
    let (_, prof) = t.user("prof", "instructor");
    let (theirs, _) = t.user("dana", "student");
    t.user("erin", "student");
    t.user("admin", "admin");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/courses",
        Some(to_json(&course("ml1", "ML", "base")))
    );
    assert_eq!(status, 201, "{body}");
    Enrollment::insert(&mut t.conn(), course_id(&t, "ml1"), theirs.user.id, None).unwrap();

    for (owner, want) in [("admin", 403), ("erin", 403), ("dana", 202), ("prof", 202)] {
        let (status, body) = call!(
            &app,
            &prof,
            "POST",
            "/api/v1/instances",
            Some(instance(&format!("box-{owner}"), Some(owner)))
        );
        assert_eq!(status, want, "owner {owner}: {body}");
    }
    let made: Vec<String> = instances::table
        .select(instances::name)
        .order(instances::name)
        .load(&mut t.conn())
        .unwrap();
    assert_eq!(made, ["box-dana", "box-prof"]);

    // Issue 47, item 15: what dana gets is a student's, whoever asks: no more than a student's
    // allowance, and no more instances than a student may own.
    let mut big = instance("box-dana-big", Some("dana"));
    big["limits"]["cpu"] = json!(8);
    let (status, body) = call!(&app, &prof, "POST", "/api/v1/instances", Some(big));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "limits.cpu", "{body}");
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/instances",
        Some(instance("box-dana-2", Some("dana")))
    );
    assert_eq!(status, 202, "{body}");
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/instances",
        Some(instance("box-dana-3", Some("dana")))
    );
    assert_eq!(status, 409, "past a student's cap: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("at most 2"),
        "{body}"
    );
}

#[actix_web::test]
async fn a_request_no_node_can_ever_hold_is_refused_and_one_that_may_fit_later_queues() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    t.image("base");
    // One node of 4 cores and 8 GiB, without GPUs or the NVIDIA runtime.
    t.node("n1", (42000, 42009), 4, 8, false);
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let with = |name: &str, extra: Value| {
        let mut body = instance(name, None);
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for (name, extra, field) in [
        ("gpu", json!({"gpus": 1}), "gpus"),
        (
            "a100",
            json!({"gpus": 1, "gpu_model": "NVIDIA A100"}),
            "gpu_model",
        ),
        (
            "huge",
            json!({"limits": {"cpu": 1, "memory_mib": 65536, "disk_gib": 1}}),
            "limits.memory_mib",
        ),
    ] {
        let (status, body) = call!(
            &app,
            &admin,
            "POST",
            "/api/v1/instances",
            Some(with(name, extra))
        );
        assert_eq!(status, 409, "{name}: {body}");
        assert_eq!(body["error"]["field"], field, "{name}: {body}");
    }
    // 6 GiB fits the node, and 6 GiB more fits it once the first goes: that one queues.
    let six = json!({"limits": {"cpu": 1, "memory_mib": 6144, "disk_gib": 1}});
    let (status, first) = call!(
        &app,
        &admin,
        "POST",
        "/api/v1/instances",
        Some(with("first", six.clone()))
    );
    assert_eq!(status, 202, "{first}");
    let (status, second) = call!(
        &app,
        &admin,
        "POST",
        "/api/v1/instances",
        Some(with("second", six))
    );
    assert_eq!(status, 202, "{second}");
    let states: Vec<(String, Option<i64>)> = instances::table
        .select((instances::name, instances::node_id))
        .order(instances::name)
        .load(&mut t.conn())
        .unwrap();
    assert_eq!(
        states.len(),
        2,
        "nothing of the refused requests stayed: {states:?}"
    );

    // A course of one GPU each on this lab is refused at its provision, naming the field.
    let (prof, prof_token) = t.user("prof", "instructor");
    let (student, _) = t.user("stu", "student");
    let (status, body) = call!(
        &app,
        &prof_token,
        "POST",
        "/api/v1/courses",
        Some(to_json(&CreateCourse {
            gpus: Some(1),
            ..course("gpu1", "GPUs", "base")
        }))
    );
    assert_eq!(status, 201, "{body}");
    Enrollment::insert(&mut t.conn(), course_id(&t, "gpu1"), student.user.id, None).unwrap();
    let (status, body) = call!(
        &app,
        &prof_token,
        "POST",
        "/api/v1/courses/gpu1/provision",
        None
    );
    assert_eq!(
        (status, &body["error"]["field"]),
        (409, &json!("gpus")),
        "{body}"
    );
    let made: i64 = instances::table
        .filter(instances::owner_id.eq(student.user.id))
        .count()
        .get_result(&mut t.conn())
        .unwrap();
    assert_eq!(made, 0, "the refused provision left an instance");
    drop(prof);
    assert!(states[0].1.is_some() && states[1].1.is_none(), "{states:?}");
}

#[actix_web::test]
async fn an_operation_whose_steps_were_cancelled_is_not_a_success() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    // No node: the instance waits in the queue, and is deleted before it is ever made.
    let (status, create) = call!(
        &app,
        &admin,
        "POST",
        "/api/v1/instances",
        Some(instance("gone", None))
    );
    assert_eq!(status, 202, "{create}");
    let (status, delete) = call!(&app, &admin, "DELETE", "/api/v1/instances/gone", None);
    assert_eq!(status, 202, "{delete}");
    let running = tokio::spawn(worker::run(t.ctl.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let finished = |op: &Value| {
        op["status"]
            .as_str()
            .is_some_and(|s| s != "pending" && s != "running")
    };
    let (mut created, mut deleted) = (Value::Null, Value::Null);
    while Instant::now() < deadline && !(finished(&created) && finished(&deleted)) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        created = call!(
            &app,
            &admin,
            "GET",
            &format!("/api/v1/operations/{}", create["id"].as_str().unwrap()),
            None
        )
        .1;
        deleted = call!(
            &app,
            &admin,
            "GET",
            &format!("/api/v1/operations/{}", delete["id"].as_str().unwrap()),
            None
        )
        .1;
    }
    running.abort();
    assert_eq!(deleted["status"], "success", "{deleted}");
    assert_eq!(created["status"], "cancelled", "{created}");
    assert!(
        created["error"]
            .as_str()
            .unwrap()
            .contains("1 of 1 items were cancelled"),
        "{created}"
    );
}

#[actix_web::test]
async fn sizes_the_node_would_refuse_are_refused_at_the_course_and_the_instance() {
    let t = TestController::new();
    let (_, prof) = t.user("prof", "instructor");
    let image = t.image("base");
    // An image whose tarball alone is 2 GiB.
    diesel::update(cohort_controller::db::schema::images::table.find(image.id))
        .set(cohort_controller::db::schema::images::size_bytes.eq(2i64 << 30))
        .execute(&mut t.conn())
        .unwrap();
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    for (body, field) in [
        (
            json!({"code": "c1", "title": "T", "image": "base", "memory_mib": 1}),
            "memory_mib",
        ),
        (
            json!({"code": "c1", "title": "T", "image": "base", "disk_gib": 1}),
            "disk_gib",
        ),
    ] {
        let (status, got) = call!(&app, &prof, "POST", "/api/v1/courses", Some(body));
        assert_eq!(
            (status, &got["error"]["field"]),
            (400, &json!(field)),
            "{got}"
        );
    }
    let tiny = json!({"name": "tiny", "image": "base",
                      "limits": {"cpu": 1, "memory_mib": 16, "disk_gib": 4}});
    let (status, got) = call!(&app, &prof, "POST", "/api/v1/instances", Some(tiny));
    assert_eq!(
        (status, &got["error"]["field"]),
        (400, &json!("limits.memory_mib")),
        "{got}"
    );
    let (status, got) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/courses",
        Some(to_json(&CreateCourse {
            memory_mib: Some(64),
            disk_gib: Some(3),
            ..course("c1", "T", "base")
        }))
    );
    assert_eq!(status, 201, "the least sizes pass: {got}");
}

/// Issue 47, item 4: four provisions of one course at once (a double-click is enough) make each
/// student's container once: one is taken, the others are refused with 409 naming it; every
/// student has one instance, under its usual name, on a port no other holds.
#[actix_web::test]
async fn concurrent_provisions_of_one_course_make_each_container_once() {
    let t = TestController::new();
    let (_, prof) = t.user("prof", "instructor");
    t.node("n1", (22000, 22100), 64, 256, false);
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/courses",
        Some(to_json(&CreateCourse {
            memory_mib: Some(256),
            disk_gib: Some(1),
            ..course("race1", "Race", "base")
        }))
    );
    assert_eq!(status, 201, "{body}");
    let course = course_id(&t, "race1");
    let names: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    for name in &names {
        let (student, _) = t.user(name, "student");
        Enrollment::insert(&mut t.conn(), course, student.user.id, None).unwrap();
    }
    let provision =
        || async { call!(&app, &prof, "POST", "/api/v1/courses/race1/provision", None) };
    let answers =
        futures_util::future::join_all([provision(), provision(), provision(), provision()]).await;
    let taken: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == 202)
        .map(|(_, body)| body)
        .collect();
    assert_eq!(taken.len(), 1, "{answers:?}");
    let first = taken[0]["id"].as_str().expect("operation id");
    for (status, body) in answers.iter().filter(|(status, _)| *status != 202) {
        assert_eq!(*status, 409, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(first), "names the running one: {body}");
    }
    let rows: Vec<(String, Option<i32>)> = instances::table
        .filter(instances::course_id.eq(course))
        .select((instances::name, instances::ssh_port))
        .load(&mut t.conn())
        .unwrap();
    let mut got: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
    got.sort();
    let want: Vec<String> = names
        .iter()
        .map(|n| naming::instance_name("race1", n))
        .collect();
    assert_eq!(got, want, "one instance each, under its usual name");
    let mut ports: Vec<i32> = rows.iter().filter_map(|(_, p)| *p).collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), names.len(), "every port once: {rows:?}");
}

/// Issue 47, item 4: the database itself refuses to give an instance a port an orphan container
/// still forwards, whatever the caller checked.
#[actix_web::test]
async fn the_database_never_gives_an_orphans_port_to_an_instance() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let node = t.node("n1", (23000, 23100), 64, 256, false).id;
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, body) = call!(
        &app,
        &admin,
        "POST",
        "/api/v1/instances",
        Some(instance("placed", None))
    );
    assert_eq!(status, 202, "{body}");
    let mut conn = t.conn();
    let (id, port): (i64, Option<i32>) = instances::table
        .filter(instances::name.eq("placed"))
        .select((instances::id, instances::ssh_port))
        .first(&mut conn)
        .unwrap();
    let port = port.expect("placed on n1");
    diesel::sql_query(
        "INSERT INTO orphans (node_id, name, status, ssh_port) VALUES ($1, 'left-behind', 'running', $2)",
    )
    .bind::<diesel::sql_types::BigInt, _>(node)
    .bind::<diesel::sql_types::Integer, _>(port + 1)
    .execute(&mut conn)
    .unwrap();
    let refused = diesel::update(instances::table.find(id))
        .set(instances::ssh_port.eq(port + 1))
        .execute(&mut conn);
    match refused {
        Err(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            info,
        )) => assert_eq!(
            info.constraint_name(),
            Some("instances_port_held_by_orphan")
        ),
        other => panic!("an orphan's port was given to an instance: {other:?}"),
    }
}

/// Issue 47, item 6: the language switch goes back only to a path of the portal, as the browser
/// will resolve it (a tab or a newline dropped, a backslash read as a slash): never off-site,
/// never a 500.
#[actix_web::test]
async fn the_language_switch_never_sends_the_browser_off_site() {
    let t = TestController::new();
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    for (next, want) in [
        ("/%09/evil.example", "/"),
        ("/%0a/evil.example", "/"),
        ("/%0d%0a/evil.example", "/"),
        ("//evil.example", "/"),
        ("/\\evil.example", "/"),
        ("/%5Cevil.example", "/"),
        ("https://evil.example/", "/"),
        ("/%20/evil.example", "/"),
        ("/courses/cs101?tab=roster", "/courses/cs101?tab=roster"),
        ("/account", "/account"),
    ] {
        let req = test::TestRequest::get()
            .uri(&format!("/lang/en?next={next}"))
            .to_request();
        let resp = test::call_service(&app, req).await;
        assert_eq!(resp.status().as_u16(), 303, "{next}");
        let location = resp
            .headers()
            .get("location")
            .and_then(|l| l.to_str().ok())
            .unwrap_or_default()
            .to_string();
        assert_eq!(location, want, "next={next}");
    }
}

/// Issue 47, item 13: an instructor publishes only under their own name, never a shared-looking
/// one; an admin promotes an image into the shared names by renaming it.
#[actix_web::test]
async fn instructors_publish_under_their_own_name_and_admins_promote() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.node("n1", (24000, 24100), 64, 256, false);
    t.image("base");
    t.image("cohort/taken");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/instances",
        Some(instance("prof-box", None))
    );
    assert_eq!(status, 202, "{body}");
    let publish = |alias: &str| json!({"instance": "prof-box", "alias": alias});
    for alias in ["cohort/jupyter-gpu", "jupyter-gpu", "prof/", "professor/x"] {
        let (status, body) = call!(
            &app,
            &prof,
            "POST",
            "/api/v1/images/publish",
            Some(publish(alias))
        );
        assert_eq!(status, 400, "{alias}: {body}");
        assert_eq!(body["error"]["field"], "alias", "{alias}: {body}");
    }
    // Under their own name the alias passes (the running box is what is refused then).
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/api/v1/images/publish",
        Some(publish("prof/jupyter-gpu"))
    );
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["field"], "instance", "{body}");

    // Promotion is an admin's rename.
    let promote = json!({"alias": "cohort/jupyter-gpu"});
    let (status, body) = call!(
        &app,
        &prof,
        "PATCH",
        "/api/v1/images/base",
        Some(promote.clone())
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = call!(
        &app,
        &admin,
        "PATCH",
        "/api/v1/images/base",
        Some(json!({"alias": "cohort/taken"}))
    );
    assert_eq!(status, 409, "{body}");
    let (status, body) = call!(&app, &admin, "PATCH", "/api/v1/images/base", Some(promote));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["alias"], "cohort/jupyter-gpu", "{body}");
    let (status, _) = call!(
        &app,
        &admin,
        "GET",
        "/api/v1/images/cohort%2Fjupyter-gpu",
        None
    );
    assert_eq!(status, 200);
}
