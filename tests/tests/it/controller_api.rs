//! The REST API's access rules: every role against every route (an RBAC matrix), a student
//! against a classmate's instance, bad input refused with a 400 naming the field, and an audit
//! row for every change.

use actix_web::{test, web, App};
use cohort_controller::db::schema::{audit_log, courses, instances as inst};
use cohort_controller::http::api;
use cohort_controller::instances::manage as instances;
use cohort_e2e::bodies::{self, new_user, to_json, Role, StateAction};
use cohort_e2e::controller::TestController;
use cohort_proto::api::courses::{CourseLimits, CourseQuota};
use cohort_proto::api::gpus::UpdateGpu;
use cohort_proto::api::instances::{
    CreateInstance, GpuShare, Instance, MoveInstance, PlacementStrategy,
};
use cohort_proto::api::operations::Operation;
use cohort_proto::api::users::SetRole;
use cohort_proto::ErrorBody;
use diesel::prelude::*;

fn queued(name: &str, owner: &str) -> CreateInstance {
    CreateInstance {
        name: name.into(),
        image: "base".into(),
        limits: None,
        gpus: 0,
        gpu_model: None,
        gpu_share: GpuShare::Shared,
        config: Default::default(),
        owner: Some(owner.into()),
        node: None,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        queue: true,
        start: true,
    }
}

/// (method, path, JSON body, expected status for [admin, instructor, student], without a token)
type Row = (
    &'static str,
    String,
    Option<serde_json::Value>,
    [u16; 3],
    u16,
);

#[actix_web::test]
async fn every_role_against_every_route() {
    let t = TestController::new();
    let (admin, admin_token) = t.user("admin", "admin");
    let (prof, prof_token) = t.user("prof", "instructor");
    let (_, alice_token) = t.user("alice", "student");
    let (_, bob_token) = t.user("bob", "student");
    let base = t.image("base");
    // No node exists, so both instances stay queued: the proxied routes answer 409 to those
    // allowed through and 403 to the rest.
    instances::create(&t.ctl, admin.clone(), queued("alice-box", "alice"))
        .await
        .unwrap();
    instances::create(&t.ctl, admin.clone(), queued("cs101-bob", "bob"))
        .await
        .unwrap();
    let mut conn = t.conn();
    let course: i64 = diesel::insert_into(courses::table)
        .values((
            courses::code.eq("cs101"),
            courses::title.eq("Intro"),
            courses::instructor_id.eq(prof.user.id),
        ))
        .returning(courses::id)
        .get_result(&mut conn)
        .unwrap();
    diesel::update(inst::table.filter(inst::name.eq("cs101-bob")))
        .set(inst::course_id.eq(course))
        .execute(&mut conn)
        .unwrap();
    // A second instructor's course, whose roster, students and endpoints (first-login
    // passwords) are no business of `prof`'s; and alice enrolled in cs101, which lets her read
    // the course but not its students or endpoints.
    let (prof2, _) = t.user("prof2", "instructor");
    diesel::insert_into(courses::table)
        .values((
            courses::code.eq("cs900"),
            courses::title.eq("Other"),
            courses::instructor_id.eq(prof2.user.id),
            courses::image_id.eq(base.id),
        ))
        .execute(&mut conn)
        .unwrap();
    let alice_id: i64 = cohort_controller::db::schema::users::table
        .filter(cohort_controller::db::schema::users::username.eq("alice"))
        .select(cohort_controller::db::schema::users::id)
        .first(&mut conn)
        .unwrap();
    cohort_controller::db::models::enrollment::Enrollment::insert(
        &mut conn, course, alice_id, None,
    )
    .unwrap();
    let admin_op: Operation =
        instances::create(&t.ctl, admin.clone(), queued("admin-box", "admin"))
            .await
            .unwrap();

    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let json = |v: serde_json::Value| Some(v);
    let rows: Vec<Row> = vec![
        ("GET", "/api/v1/me".into(), None, [200, 200, 200], 401),
        ("GET", "/api/v1/users".into(), None, [200, 200, 403], 401),
        (
            "POST",
            "/api/v1/users".into(),
            json(to_json(&new_user("carol", Role::Student))),
            [201, 403, 403],
            401,
        ),
        (
            // bob's own role: an admin's change is a no-op here, so later rows see him unchanged.
            "PUT",
            "/api/v1/users/bob/role".into(),
            json(to_json(&SetRole {
                role: Role::Student,
            })),
            [200, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/users/alice/tokens".into(),
            None,
            [201, 403, 201],
            401,
        ),
        ("GET", "/api/v1/nodes".into(), None, [200, 200, 403], 401),
        (
            "POST",
            "/api/v1/nodes/tokens".into(),
            json(serde_json::json!({"node_name": "node-x"})),
            [201, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/nodes/node-x".into(),
            None,
            [404, 404, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/nodes/node-x/cordon".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/nodes/node-x/evacuate".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/nodes/node-x/restore".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "DELETE",
            "/api/v1/nodes/node-x".into(),
            None,
            [404, 403, 403],
            401,
        ),
        ("GET", "/api/v1/gpus".into(), None, [200, 200, 403], 401),
        ("GET", "/api/v1/orphans".into(), None, [200, 403, 403], 401),
        // Active, so refused even to those who may delete it.
        (
            "DELETE",
            "/api/v1/courses/cs101".into(),
            None,
            [409, 409, 403],
            401,
        ),
        (
            "DELETE",
            "/api/v1/orphans/node-x/stray".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/orphans/node-x/stray/adopt".into(),
            json(serde_json::json!({"owner": "alice", "image": "base"})),
            [404, 403, 403],
            401,
        ),
        (
            "PATCH",
            "/api/v1/gpus/GPU-x".into(),
            json(to_json(&UpdateGpu { share_limit: 2 })),
            [404, 403, 403],
            401,
        ),
        ("GET", "/api/v1/images".into(), None, [200, 200, 200], 401),
        (
            "GET",
            "/api/v1/images/base".into(),
            None,
            [200, 200, 200],
            401,
        ),
        (
            "DELETE",
            "/api/v1/images/nope".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/images/nope/tarball".into(),
            None,
            [404, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/images/nope/distribute".into(),
            None,
            [404, 404, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/images/base/distribute".into(),
            None,
            [202, 202, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/instances".into(),
            None,
            [200, 200, 200],
            401,
        ),
        (
            "GET",
            "/api/v1/instances/alice-box".into(),
            None,
            [200, 403, 200],
            401,
        ),
        (
            "GET",
            "/api/v1/instances/cs101-bob".into(),
            None,
            [200, 200, 403],
            401,
        ),
        (
            "PUT",
            "/api/v1/instances/alice-box/state".into(),
            json(to_json(&bodies::state_change(StateAction::Stop))),
            [202, 403, 202],
            401,
        ),
        (
            // No such node (an admin's 404 names `target`); nobody else may move at all.
            "POST",
            "/api/v1/instances/alice-box/move".into(),
            json(to_json(&MoveInstance {
                target: "node-x".into(),
            })),
            [404, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/instances/alice-box/exec".into(),
            json(to_json(&bodies::exec(&["true"]))),
            [409, 403, 409],
            401,
        ),
        (
            "GET",
            "/api/v1/instances/alice-box/files?path=/etc/hostname".into(),
            None,
            [409, 403, 409],
            401,
        ),
        (
            "GET",
            "/api/v1/instances/alice-box/snapshots".into(),
            None,
            [409, 403, 409],
            401,
        ),
        (
            "POST",
            "/api/v1/instances/alice-box/snapshots".into(),
            json(to_json(&bodies::snapshot("s1"))),
            [409, 403, 409],
            401,
        ),
        (
            "PATCH",
            "/api/v1/instances/alice-box".into(),
            json(to_json(&bodies::set_config(&[("user.x", "1")]))),
            [409, 403, 409],
            401,
        ),
        (
            "PATCH",
            "/api/v1/instances/alice-box".into(),
            json(to_json(&bodies::UpdateInstance {
                add_devices: [(
                    "web".to_string(),
                    [
                        ("type", "proxy"),
                        ("listen", "tcp:127.0.0.1:8080"),
                        ("connect", "tcp:127.0.0.1:80"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                )]
                .into(),
                ..Default::default()
            })),
            [409, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/instances/alice-box/config".into(),
            None,
            [409, 403, 409],
            401,
        ),
        (
            "POST",
            "/api/v1/images/publish".into(),
            json(to_json(&bodies::publish("alice-box", "pub1"))),
            [409, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/operations".into(),
            None,
            [200, 200, 200],
            401,
        ),
        (
            "GET",
            format!("/api/v1/operations/{}", admin_op.id),
            None,
            [200, 404, 404],
            401,
        ),
        (
            "GET",
            format!("/api/v1/operations/{}/wait?timeout=0", admin_op.id),
            None,
            [200, 404, 404],
            401,
        ),
        ("GET", "/api/v1/courses".into(), None, [200, 200, 200], 401),
        (
            "POST",
            "/api/v1/courses".into(),
            json(to_json(&bodies::course("cs201", "New", "base"))),
            [201, 409, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs101".into(),
            None,
            [200, 200, 200],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs900".into(),
            None,
            [200, 403, 403],
            401,
        ),
        (
            "PUT",
            "/api/v1/courses/cs101/quota".into(),
            json(to_json(&CourseQuota {
                max_students: Some(50),
                ..Default::default()
            })),
            [200, 403, 403],
            401,
        ),
        (
            "PUT",
            "/api/v1/courses/cs101/limits".into(),
            json(to_json(&CourseLimits {
                cpu: Some(1),
                ..Default::default()
            })),
            [200, 200, 403],
            401,
        ),
        (
            "PUT",
            "/api/v1/courses/cs900/limits".into(),
            json(to_json(&CourseLimits {
                cpu: Some(1),
                ..Default::default()
            })),
            [200, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs101/students".into(),
            None,
            [200, 200, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs900/students".into(),
            None,
            [200, 403, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs101/endpoints".into(),
            None,
            [200, 200, 403],
            401,
        ),
        (
            "GET",
            "/api/v1/courses/cs900/endpoints".into(),
            None,
            [200, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/courses/cs900/roster".into(),
            json(serde_json::json!([{"username": "zoe"}])),
            [200, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/courses/cs900/students/zoe/reset".into(),
            None,
            [409, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/courses/cs900/provision".into(),
            None,
            [202, 403, 403],
            401,
        ),
        (
            "POST",
            "/api/v1/courses/cs900/teardown".into(),
            json(serde_json::json!({})),
            [202, 403, 403],
            401,
        ),
        (
            "DELETE",
            "/api/v1/instances/alice-box?force=true".into(),
            None,
            [202, 403, 202],
            401,
        ),
    ];
    let tokens = [&admin_token, &prof_token, &alice_token];
    let mut failures = Vec::new();
    for (method, path, body, expected, anonymous) in &rows {
        for (who, token) in ["admin", "instructor", "student", "nobody"]
            .iter()
            .zip(tokens.iter().map(Some).chain([None]))
        {
            let mut req = test::TestRequest::default()
                .method(method.parse().unwrap())
                .uri(path);
            if let Some(token) = token {
                req = req.insert_header(("Authorization", format!("Bearer {token}")));
            }
            if let Some(body) = body {
                req = req.set_json(body);
            }
            let resp = test::call_service(&app, req.to_request()).await;
            let want = match *who {
                "admin" => expected[0],
                "instructor" => expected[1],
                "student" => expected[2],
                _ => *anonymous,
            };
            if resp.status().as_u16() != want {
                failures.push(format!(
                    "{who} {method} {path}: {} (want {want})",
                    resp.status()
                ));
            } else if !resp.status().is_success() {
                let body: ErrorBody = test::read_body_json(resp).await;
                assert!(!body.error.code.is_empty());
            }
        }
    }
    assert!(
        failures.is_empty(),
        "RBAC matrix mismatches:\n{}",
        failures.join("\n")
    );

    // A student against a classmate's instance: every write is a 403 (the instance exists; it
    // is not theirs), and nothing was done (alice-box is still there to be deleted above).
    let writes: Vec<(&str, String, Option<serde_json::Value>)> = vec![
        (
            "PUT",
            "/api/v1/instances/cs101-bob/state".into(),
            json(to_json(&bodies::state_change(StateAction::Stop))),
        ),
        (
            "DELETE",
            "/api/v1/instances/cs101-bob?force=true".into(),
            None,
        ),
        (
            "PATCH",
            "/api/v1/instances/cs101-bob".into(),
            json(to_json(&bodies::set_config(&[("user.x", "1")]))),
        ),
        (
            "POST",
            "/api/v1/instances/cs101-bob/exec".into(),
            json(to_json(&bodies::exec(&["true"]))),
        ),
        (
            "POST",
            "/api/v1/instances/cs101-bob/snapshots".into(),
            json(to_json(&bodies::snapshot("s1"))),
        ),
        (
            "DELETE",
            "/api/v1/instances/cs101-bob/snapshots/s1".into(),
            None,
        ),
        (
            "POST",
            "/api/v1/instances/cs101-bob/snapshots/s1/restore".into(),
            None,
        ),
        (
            "POST",
            "/api/v1/images/publish".into(),
            json(to_json(&bodies::publish("cs101-bob", "stolen"))),
        ),
    ];
    for (method, path, body) in &writes {
        let mut req = test::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(path)
            .insert_header(("Authorization", format!("Bearer {alice_token}")));
        if let Some(body) = body {
            req = req.set_json(body);
        }
        let resp = test::call_service(&app, req.to_request()).await;
        assert_eq!(resp.status(), 403, "alice {method} {path}");
    }
    let put = test::TestRequest::put()
        .uri("/api/v1/instances/cs101-bob/files?path=/tmp/x")
        .insert_header(("Authorization", format!("Bearer {alice_token}")))
        .set_payload("x")
        .to_request();
    assert_eq!(
        test::call_service(&app, put).await.status(),
        403,
        "alice pushed a file"
    );
    let bob_desired: String = inst::table
        .filter(inst::name.eq("cs101-bob"))
        .select(inst::desired_state)
        .first(&mut conn)
        .unwrap();
    assert_eq!(
        bob_desired, "running",
        "a classmate's write changed bob's instance"
    );

    // A student reading a classmate's instance: 403, and it is not in their list.
    let get = |token: &str, path: &str| {
        test::TestRequest::get()
            .uri(path)
            .insert_header(("Authorization", format!("Bearer {token}")))
            .to_request()
    };
    let resp = test::call_service(&app, get(&bob_token, "/api/v1/instances/alice-box")).await;
    assert_eq!(resp.status(), 403);
    let listed: Vec<Instance> =
        test::call_and_read_body_json(&app, get(&alice_token, "/api/v1/instances")).await;
    let names: Vec<&str> = listed.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        ["alice-box"],
        "a student sees only their own instances"
    );
    let taught: Vec<Instance> =
        test::call_and_read_body_json(&app, get(&prof_token, "/api/v1/instances")).await;
    assert_eq!(
        taught.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["cs101-bob"]
    );

    // A bad token is refused like none.
    let resp = test::call_service(&app, get("cohort_forged", "/api/v1/me")).await;
    assert_eq!(resp.status(), 401);

    // Public routes (`/metrics` is not: `metrics_need_the_metrics_token_or_an_admins`).
    for path in ["/healthz", "/api/v1/openapi.json", "/api/v1/ca"] {
        let resp = test::call_service(&app, test::TestRequest::get().uri(path).to_request()).await;
        assert_eq!(resp.status(), 200, "{path}");
    }

    // Every change was audited.
    let actions: Vec<(String, String, String)> = audit_log::table
        .order(audit_log::id)
        .select((audit_log::actor, audit_log::action, audit_log::object))
        .load(&mut conn)
        .unwrap();
    for want in [
        ("admin", "create", "carol"),
        ("admin", "issue_token", "alice"),
        ("alice", "issue_token", "alice"),
        ("admin", "create_join_token", "node-x"),
        ("alice", "stop", "alice-box"),
        ("admin", "delete", "alice-box"),
    ] {
        assert!(
            actions
                .iter()
                .any(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()) == want),
            "no audit row {want:?} in {actions:?}"
        );
    }
}

#[actix_web::test]
async fn bad_input_is_a_400_naming_the_field_and_creates_nothing() {
    let t = TestController::new();
    let (_, token) = t.user("admin", "admin");
    let (_, student) = t.user("alice", "student");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "admin",
            serde_json::json!({"name": "-a", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "a-", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "123", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "a".repeat(64), "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "a_b", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "ä", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "../x", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "", "image": "base"}),
            "name",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"raw.lxc": "x"}}),
            "config.raw.lxc",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"security.privileged": "true"}}),
            "config.security.privileged",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"security.nesting": "true"}}),
            "config.security.nesting",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"raw.idmap": "x"}}),
            "config.raw.idmap",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"nonsense.key": "x"}}),
            "config.nonsense.key",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "config": {"user.note": "a\nb"}}),
            "config.user.note",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "nope"}),
            "image",
        ),
        (
            "admin",
            serde_json::json!({"name": "ok", "image": "base", "surprise": 1}),
            "surprise",
        ),
        ("admin", serde_json::json!({"image": "base"}), "name"),
        (
            "student",
            serde_json::json!({"name": "ok", "image": "base", "limits": {"cpu": 64, "memory_mib": 1024, "disk_gib": 10}}),
            "limits.cpu",
        ),
    ];
    for (who, body, field) in cases {
        let bearer = if who == "admin" { &token } else { &student };
        let req = test::TestRequest::post()
            .uri("/api/v1/instances")
            .insert_header(("Authorization", format!("Bearer {bearer}")))
            .set_json(&body)
            .to_request();
        let resp = test::call_service(&app, req).await;
        assert_eq!(resp.status(), 400, "{body}");
        let err: ErrorBody = test::read_body_json(resp).await;
        assert_eq!(err.error.field.as_deref(), Some(field), "{body}: {err:?}");
    }
    let rows: i64 = inst::table.count().get_result(&mut t.conn()).unwrap();
    assert_eq!(rows, 0, "a refused request left an instance behind");

    let key = test::TestRequest::post()
        .uri("/api/v1/me/ssh-keys")
        .insert_header(("Authorization", format!("Bearer {student}")))
        .set_json(serde_json::json!({"public_key": "command=\"rm -rf /\" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"}))
        .to_request();
    let resp = test::call_service(&app, key).await;
    assert_eq!(resp.status(), 400);
    let err: ErrorBody = test::read_body_json(resp).await;
    assert_eq!(err.error.field.as_deref(), Some("public_key"));

    // Distributing an image the catalog lacks: a 404 naming the alias, no operation started.
    let distribute = test::TestRequest::post()
        .uri("/api/v1/images/nope/distribute")
        .insert_header(("Authorization", format!("Bearer {token}")))
        .to_request();
    let resp = test::call_service(&app, distribute).await;
    assert_eq!(resp.status(), 404);
    let err: ErrorBody = test::read_body_json(resp).await;
    assert_eq!(err.error.field.as_deref(), Some("alias"), "{err:?}");
    let ops: i64 = cohort_controller::db::schema::operations::table
        .count()
        .get_result(&mut t.conn())
        .unwrap();
    assert_eq!(ops, 0, "a refused distribution started an operation");
}

/// A controller with an admin, a student alice who owns `alices` (queued instances), and the
/// admin's own `z-admin`; the admin's and alice's tokens.
async fn listing(alices: &[&str]) -> (TestController, String, String) {
    let t = TestController::new();
    let (admin, admin_token) = t.user("admin", "admin");
    let (_, alice_token) = t.user("alice", "student");
    t.image("base");
    for name in alices {
        instances::create(&t.ctl, admin.clone(), queued(name, "alice"))
            .await
            .unwrap();
    }
    instances::create(&t.ctl, admin, queued("z-admin", "admin"))
        .await
        .unwrap();
    (t, admin_token, alice_token)
}

#[actix_web::test]
async fn instances_are_listed_in_pages_linked_by_next() {
    let (t, admin_token, alice_token) = listing(&["a1", "a2", "a3", "a4", "a5"]).await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let get = |token: &str, path: &str| {
        test::TestRequest::get()
            .uri(path)
            .insert_header(("Authorization", format!("Bearer {token}")))
            .to_request()
    };

    // Follow the Link headers as a client would: every instance once, in name order.
    let mut names = Vec::new();
    let mut next = Some("/api/v1/instances?limit=2".to_string());
    let mut pages = 0;
    while let Some(path) = next.take() {
        pages += 1;
        assert!(pages <= 4, "more pages than 6 instances in pages of 2");
        let resp = test::call_service(&app, get(&admin_token, &path)).await;
        assert_eq!(resp.status(), 200, "{path}");
        next = resp
            .headers()
            .get("Link")
            .map(|v| v.to_str().unwrap().to_string())
            .map(|link| {
                let target = link.split(';').next().unwrap();
                assert!(link.ends_with("rel=\"next\""), "{link}");
                target.trim_matches(['<', '>', ' ']).to_string()
            });
        let page: Vec<Instance> = test::read_body_json(resp).await;
        assert!(page.len() <= 2);
        names.extend(page.into_iter().map(|i| i.name));
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["a1", "a2", "a3", "a4", "a5", "z-admin"]);

    // A student's pages hold only their own, and the last page has no Link.
    let resp = test::call_service(&app, get(&alice_token, "/api/v1/instances?limit=5")).await;
    assert!(resp.headers().get("Link").is_none());
    let page: Vec<Instance> = test::read_body_json(resp).await;
    assert_eq!(page.len(), 5);
    let resp = test::call_service(
        &app,
        get(&alice_token, "/api/v1/instances?limit=2&after=a4"),
    )
    .await;
    let page: Vec<Instance> = test::read_body_json(resp).await;
    assert_eq!(
        page.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["a5"]
    );

    // A page size out of range, or an unknown parameter, is a 400 naming it.
    for (path, field) in [
        ("/api/v1/instances?limit=0", "limit"),
        ("/api/v1/instances?limit=1001", "limit"),
    ] {
        let resp = test::call_service(&app, get(&admin_token, path)).await;
        assert_eq!(resp.status(), 400, "{path}");
        let body: ErrorBody = test::read_body_json(resp).await;
        assert_eq!(body.error.field.as_deref(), Some(field), "{path}");
    }
    let resp = test::call_service(&app, get(&admin_token, "/api/v1/instances?page=2")).await;
    assert_eq!(resp.status(), 400);
}

/// Connections the database cuts (a restart, `pg_terminate_backend`) are found by the pool's
/// check on checkout and replaced: work goes on, and no cut connection fails more than once.
#[actix_web::test]
async fn connections_the_database_cuts_are_replaced_and_work_goes_on() {
    use diesel::sql_types::{BigInt, Integer};
    #[derive(QueryableByName)]
    struct Cut {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let tc = TestController::new();
    let one = |ctl: std::sync::Arc<cohort_controller::app::state::Controller>| async move {
        ctl.db(|conn| Ok(diesel::select(1.into_sql::<Integer>()).get_result::<i32>(conn)?))
            .await
    };
    // Several connections in the pool, each just used.
    let warm = futures_util::future::join_all((0..4).map(|_| one(tc.ctl.clone()))).await;
    assert!(warm.iter().all(|r| matches!(r, Ok(1))), "{warm:?}");

    let cut = diesel::sql_query(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .get_result::<Cut>(&mut tc.conn())
    .unwrap()
    .n;
    assert!(cut >= 1, "no controller connection was open");

    // Let the cut backends exit.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;

    let mut results = Vec::new();
    for _ in 0..(cut + 20) {
        results.push(one(tc.ctl.clone()).await);
    }
    let failures = results.iter().filter(|r| r.is_err()).count() as i64;
    assert!(
        failures <= cut,
        "{failures} failures for {cut} cut connections: {results:?}"
    );
    let (first_ok, _) = results
        .iter()
        .enumerate()
        .find(|(_, r)| r.is_ok())
        .expect("work never went on");
    assert!(
        results[first_ok..].iter().all(|r| matches!(r, Ok(1))),
        "work failed again after going on: {results:?}"
    );
}

/// `cohort_controller_instance_pages_total{outcome}` as the controller counts it.
fn page_reads(ctl: &cohort_controller::app::state::Controller, outcome: &str) -> u64 {
    let text = ctl.metrics.render();
    let series = format!("cohort_controller_instance_pages_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&series))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// A page of instances served again from memory is always what the database holds: a write
/// made straight in the database (as another controller process or an operator would), one
/// still uncommitted when the page was read and committed after, and a change to any table the
/// page shows each make the next request read it afresh; without one the page is served again.
#[actix_web::test]
async fn a_page_served_again_never_outlives_a_committed_change() {
    let (t, admin_token, alice_token) = listing(&["a1", "a2"]).await;
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let page = |token: &str| {
        let req = test::TestRequest::get()
            .uri("/api/v1/instances?limit=10")
            .insert_header(("Authorization", format!("Bearer {token}")))
            .to_request();
        let app = &app;
        async move {
            let resp = test::call_service(app, req).await;
            assert_eq!(resp.status(), 200);
            let page: Vec<Instance> = test::read_body_json(resp).await;
            page.into_iter()
                .map(|i| (i.name, i.priority))
                .collect::<Vec<_>>()
        }
    };
    let priorities = |p: &[(String, i32)]| p.iter().map(|(_, p)| *p).collect::<Vec<_>>();
    let (hits, misses) = (|| page_reads(&t.ctl, "hit"), || page_reads(&t.ctl, "miss"));

    let first = page(&admin_token).await;
    assert_eq!(
        first.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["a1", "a2", "z-admin"]
    );
    assert_eq!((hits(), misses()), (0, 1));
    assert_eq!(page(&admin_token).await, first);
    assert_eq!((hits(), misses()), (1, 1), "unchanged: served again");

    // Each caller's own page: the student's holds only hers, never the admin's kept one.
    let alices = page(&alice_token).await;
    assert_eq!(
        alices.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["a1", "a2"]
    );
    assert_eq!(page(&alice_token).await, alices);

    // A write straight in the database.
    let mut other = t.db.connect();
    diesel::sql_query("UPDATE instances SET priority = 7 WHERE name = 'a1'")
        .execute(&mut other)
        .unwrap();
    assert_eq!(priorities(&page(&admin_token).await), [7, 0, 0]);
    assert_eq!(priorities(&page(&alice_token).await), [7, 0]);

    // A write in flight while the page is read, committed after.
    diesel::sql_query("BEGIN").execute(&mut other).unwrap();
    diesel::sql_query("UPDATE instances SET priority = 9 WHERE name = 'a2'")
        .execute(&mut other)
        .unwrap();
    assert_eq!(
        priorities(&page(&admin_token).await),
        [7, 0, 0],
        "uncommitted"
    );
    assert_eq!(priorities(&page(&admin_token).await), [7, 0, 0]);
    diesel::sql_query("COMMIT").execute(&mut other).unwrap();
    assert_eq!(
        priorities(&page(&admin_token).await),
        [7, 9, 0],
        "committed"
    );

    // A rolled-back write changes nothing, and the page is served again.
    diesel::sql_query("BEGIN").execute(&mut other).unwrap();
    diesel::sql_query("UPDATE instances SET priority = 1")
        .execute(&mut other)
        .unwrap();
    diesel::sql_query("ROLLBACK").execute(&mut other).unwrap();
    let before = hits();
    assert_eq!(priorities(&page(&admin_token).await), [7, 9, 0]);
    assert_eq!(hits(), before + 1, "a rollback is no change");

    // A write whose first note of the transaction was rolled back to a savepoint is noted again.
    for sql in [
        "BEGIN",
        "SAVEPOINT s",
        "UPDATE instances SET priority = 2 WHERE name = 'a1'",
        "ROLLBACK TO SAVEPOINT s",
        "UPDATE instances SET priority = 3 WHERE name = 'a1'",
        "COMMIT",
    ] {
        diesel::sql_query(sql).execute(&mut other).unwrap();
    }
    assert_eq!(
        priorities(&page(&admin_token).await),
        [3, 9, 0],
        "after a savepoint"
    );

    // Every table the page shows: a committed statement on it (even one that changes no row)
    // makes the next request read the page again.
    for table in [
        "instances",
        "instance_usage",
        "gpu_allocations",
        "gpus",
        "nodes",
        "images",
        "courses",
        "users",
    ] {
        page(&admin_token).await;
        let before = misses();
        diesel::sql_query(format!("DELETE FROM {table} WHERE false"))
            .execute(&mut other)
            .unwrap();
        page(&admin_token).await;
        assert_eq!(misses(), before + 1, "a write to {table}");
    }
}

/// `inventory_writes` is pruned only below transactions that had ended by a mark old enough that
/// no kept page can be older.
#[actix_web::test]
async fn inventory_writes_are_pruned_below_an_old_mark_only() {
    use cohort_controller::instances::page_cache::{oldest_running, prune_below, unchanged_since};
    #[derive(QueryableByName)]
    struct Snap {
        #[diesel(sql_type = diesel::sql_types::Text)]
        s: String,
    }
    let t = TestController::new();
    t.user("admin", "admin");
    let mut conn = t.db.connect();
    let snapshot = |conn: &mut PgConnection| {
        diesel::sql_query("SELECT pg_current_snapshot()::text AS s")
            .get_result::<Snap>(conn)
            .unwrap()
            .s
    };
    // Ids below and at or above `mark`.
    let written = |conn: &mut PgConnection, mark: &str| {
        let mut count = |op: &str| {
            diesel::sql_query(format!(
                "SELECT count(*)::text AS s FROM inventory_writes WHERE xid {op} $1::xid8"
            ))
            .bind::<diesel::sql_types::Text, _>(mark)
            .get_result::<Snap>(conn)
            .unwrap()
            .s
            .parse::<u64>()
            .unwrap()
        };
        (count("<"), count(">="))
    };
    let seen = snapshot(&mut conn);
    assert!(unchanged_since(&mut conn, &seen).unwrap());
    diesel::sql_query("UPDATE users SET full_name = full_name")
        .execute(&mut conn)
        .unwrap();
    assert!(!unchanged_since(&mut conn, &seen).unwrap());
    let mark = oldest_running(&mut conn).unwrap();
    diesel::sql_query("UPDATE users SET full_name = full_name")
        .execute(&mut conn)
        .unwrap();
    let (below, above) = written(&mut conn, &mark);
    assert!(above >= 1, "the write after the mark");
    // (Below the mark: the writes before it, unless another database's transaction, older than
    // them, was still running when the mark was read.)
    let pruned = prune_below(&mut conn, &mark).unwrap();
    assert_eq!(pruned as u64, below);
    assert_eq!(
        written(&mut conn, &mark),
        (0, above),
        "only ids below the mark go"
    );
    // A snapshot taken before the mark still sees the later write as a change.
    assert!(!unchanged_since(&mut conn, &seen).unwrap());
}

/// `/metrics` names every course in its labels: without a token it is a 401, with a student's
/// or an instructor's a 403; Prometheus scrapes it with the configured metrics token, an admin
/// with their own token.
#[actix_web::test]
async fn metrics_need_the_metrics_token_or_an_admins() {
    let t = TestController::new();
    let (_, admin_token) = t.user("admin", "admin");
    let (prof, prof_token) = t.user("prof", "instructor");
    let (_, alice_token) = t.user("alice", "student");
    diesel::insert_into(courses::table)
        .values((
            courses::code.eq("secret-course"),
            courses::title.eq("Intro"),
            courses::instructor_id.eq(prof.user.id),
        ))
        .execute(&mut t.conn())
        .unwrap();
    let mut config = t.ctl.config.clone();
    config.auth.metrics_token = Some("prometheus-scrape-token".into());
    let pool = cohort_controller::db::pool(t.db.url(), 4).expect("pool");
    let ctl = cohort_controller::app::state::Controller::new(
        pool,
        config,
        t.ctl.pki.clone(),
        t.ctl.agents.clone(),
    );
    let app = test::init_service(App::new().configure(api::configure(web::Data::new(ctl)))).await;
    let scrape = |token: Option<&str>| {
        let req = test::TestRequest::get().uri("/metrics");
        match token {
            Some(token) => req.insert_header(("Authorization", format!("Bearer {token}"))),
            None => req,
        }
        .to_request()
    };
    for (token, status) in [
        (None, 401),
        (Some("cohort_forged"), 401),
        (Some("prometheus-wrong"), 401),
        (Some(alice_token.as_str()), 403),
        (Some(prof_token.as_str()), 403),
    ] {
        let resp = test::call_service(&app, scrape(token)).await;
        assert_eq!(resp.status(), status, "{token:?}");
        let body = test::read_body(resp).await;
        let text = String::from_utf8_lossy(&body);
        assert!(!text.contains("secret-course"), "{token:?}: {text}");
    }
    for token in ["prometheus-scrape-token", admin_token.as_str()] {
        let resp = test::call_service(&app, scrape(Some(token))).await;
        assert_eq!(resp.status(), 200, "{token}");
        let body = test::read_body(resp).await;
        let text = String::from_utf8_lossy(&body);
        assert!(text.contains("course=\"secret-course\""), "{text}");
    }
}

/// `POST /instances/{name}/move` refuses what an admin could get wrong with a 4xx naming
/// `target`, records nothing for it (no operation, no audit row, the instance where it was), and
/// is the admin's alone; a good request is a `move_instance` operation whose item names the node
/// the instance leaves.
#[actix_web::test]
async fn a_move_to_a_bad_target_is_refused_naming_it_and_records_nothing() {
    let t = TestController::new();
    let (admin, admin_token) = t.user("admin", "admin");
    let (_, prof_token) = t.user("prof", "instructor");
    let (_, alice_token) = t.user("alice", "student");
    t.image("base");
    t.node("n1", (23000, 23009), 8, 16, false);
    t.node("n2", (23000, 23009), 8, 16, false);
    let cordoned = t.node("n3", (23000, 23009), 8, 16, false);
    t.set_node_state(&cordoned, "cordoned");
    let offline = t.node("n4", (23000, 23009), 8, 16, false);
    t.set_node_state(&offline, "offline");
    t.node("tiny", (23000, 23009), 8, 1, false);
    let mut placed = queued("alice-box", "alice");
    placed.node = Some("n1".into());
    placed.queue = false;
    placed.limits = Some(cohort_proto::api::instances::Limits {
        cpu: 1,
        memory_mib: 2048,
        disk_gib: 2,
    });
    instances::create(&t.ctl, admin.clone(), placed)
        .await
        .unwrap();
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let post = |token: &str, body: serde_json::Value| {
        test::TestRequest::post()
            .uri("/api/v1/instances/alice-box/move")
            .insert_header(("Authorization", format!("Bearer {token}")))
            .set_json(body)
            .to_request()
    };
    let moves = |conn: &mut PgConnection| -> (i64, i64) {
        use cohort_controller::db::schema::operations;
        let ops = operations::table
            .filter(operations::kind.eq("move_instance"))
            .count()
            .get_result(conn)
            .unwrap();
        let audited = audit_log::table
            .filter(audit_log::action.eq("move"))
            .count()
            .get_result(conn)
            .unwrap();
        (ops, audited)
    };
    let mut conn = t.conn();

    for token in [&prof_token, &alice_token] {
        let resp = test::call_service(
            &app,
            post(
                token,
                to_json(&MoveInstance {
                    target: "n2".into(),
                }),
            ),
        )
        .await;
        assert_eq!(resp.status(), 403, "only an admin moves an instance");
    }
    let cases = [
        ("nowhere", 404, "unknown node"),
        ("n1", 400, "its own node"),
        ("n3", 409, "a cordoned node"),
        ("n4", 409, "an offline node"),
        ("tiny", 409, "a node without room"),
    ];
    for (target, status, what) in cases {
        let resp = test::call_service(
            &app,
            post(
                &admin_token,
                to_json(&MoveInstance {
                    target: target.into(),
                }),
            ),
        )
        .await;
        assert_eq!(resp.status().as_u16(), status, "{what}");
        let body: ErrorBody = test::read_body_json(resp).await;
        assert_eq!(
            body.error.field.as_deref(),
            Some("target"),
            "{what}: {body:?}"
        );
        assert!(body.error.message.contains(target), "{what}: {body:?}");
    }
    let resp = test::call_service(
        &app,
        post(
            &admin_token,
            serde_json::json!({"target": "n2", "node": "n2"}),
        ),
    )
    .await;
    assert_eq!(resp.status(), 400, "an unknown field");
    assert_eq!(
        moves(&mut conn),
        (0, 0),
        "a refused move recorded something"
    );
    let node: Option<String> = inst::table
        .inner_join(cohort_controller::db::schema::nodes::table)
        .filter(inst::name.eq("alice-box"))
        .select(cohort_controller::db::schema::nodes::name)
        .first(&mut conn)
        .optional()
        .unwrap();
    assert_eq!(node.as_deref(), Some("n1"));

    let resp = test::call_service(
        &app,
        post(
            &admin_token,
            to_json(&MoveInstance {
                target: "n2".into(),
            }),
        ),
    )
    .await;
    assert_eq!(resp.status(), 202);
    let op: Operation = test::read_body_json(resp).await;
    assert_eq!(
        op.kind,
        cohort_proto::api::operations::OperationKind::MoveInstance
    );
    assert_eq!(op.items.len(), 1);
    assert_eq!(
        op.items[0].node.as_deref(),
        Some("n1"),
        "the node it leaves"
    );
    assert_eq!(moves(&mut conn), (1, 1));
}
