//! What the REST API refuses before it does any work: a body past its bound is a 413 without the
//! controller reading it (an anonymous caller cannot make it hold megabytes), and a bad token is a
//! 401 whatever its body holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::{test, web, App};
use base64::Engine;
use cohort_controller::http::api;
use cohort_controller::nodes::enroll::create_join_token;
use cohort_e2e::bodies::{course, to_json};
use cohort_e2e::controller::TestController;
use cohort_proto::api::courses::CourseLimits;
use cohort_proto::api::nodes::CreateJoinToken;
use cohort_proto::enroll::{EnrollRequest, JoinToken};
use cohort_proto::ErrorBody;
use futures_util::StreamExt;

const CHUNK: usize = 64 << 10;

/// A body that sends `chunks` chunks of spaces and then never ends, counting what was taken.
fn endless_body(chunks: usize, taken: Arc<AtomicUsize>) -> Payload {
    let sent = futures_util::stream::iter(0..chunks).map(move |_| {
        taken.fetch_add(CHUNK, Ordering::SeqCst);
        Ok(web::Bytes::from(vec![b' '; CHUNK]))
    });
    Payload::Stream {
        payload: Box::pin(sent.chain(futures_util::stream::pending())),
    }
}

fn enroll_request(token: &JoinToken) -> EnrollRequest {
    let key = rcgen::KeyPair::generate().unwrap();
    let csr = rcgen::CertificateParams::new(vec!["node-a".to_string()])
        .unwrap()
        .serialize_request(&key)
        .unwrap()
        .pem()
        .unwrap();
    EnrollRequest {
        node_name: "node-a".into(),
        secret: token.secret.clone(),
        csr_pem: csr,
        agent_url: "https://127.0.0.2:9443".into(),
        ssh_host: "127.0.0.2".into(),
        ssh_port_first: 24000,
        ssh_port_last: 24063,
    }
}

async fn too_large(resp: actix_web::dev::ServiceResponse, what: &str) {
    assert_eq!(resp.status(), 413, "{what}");
    let err: ErrorBody = test::read_body_json(resp).await;
    assert_eq!(err.error.code, "too_large", "{what}: {err:?}");
    assert_eq!(err.error.field.as_deref(), Some("body"), "{what}: {err:?}");
}

#[actix_web::test]
async fn an_oversized_enroll_body_is_refused_before_it_is_read() {
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    let issued = create_join_token(
        &t.ctl,
        admin,
        CreateJoinToken {
            node_name: "node-a".into(),
            ttl_seconds: None,
            addresses: vec!["127.0.0.2".into()],
        },
    )
    .await
    .unwrap();
    let raw = base64::engine::general_purpose::STANDARD
        .decode(&issued.token)
        .unwrap();
    let token: JoinToken = serde_json::from_slice(&raw).unwrap();
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let within = |what: &'static str| {
        move |r: Result<actix_web::dev::ServiceResponse, tokio::time::error::Elapsed>| {
            r.unwrap_or_else(|_| panic!("{what}: the controller waited for the whole body"))
        }
    };

    // A declared 64 MiB of which only one chunk ever comes: answered from the header alone.
    let taken = Arc::new(AtomicUsize::new(0));
    let (req, _) = test::TestRequest::post()
        .uri("/api/v1/enroll")
        .insert_header(("Content-Type", "application/json"))
        .insert_header(("Content-Length", (64usize << 20).to_string()))
        .to_request()
        .replace_payload(endless_body(1, taken.clone()));
    let resp = tokio::time::timeout(Duration::from_secs(10), test::call_service(&app, req)).await;
    too_large(within("declared")(resp), "declared 64 MiB").await;
    assert_eq!(
        taken.load(Ordering::SeqCst),
        0,
        "a declared oversize body was read"
    );

    // Chunked, with no length: read only up to the limit (1 MiB) and refused there, while the
    // sender still has more.
    let taken = Arc::new(AtomicUsize::new(0));
    let (req, _) = test::TestRequest::post()
        .uri("/api/v1/enroll")
        .insert_header(("Content-Type", "application/json"))
        .to_request()
        .replace_payload(endless_body(64, taken.clone()));
    let resp = tokio::time::timeout(Duration::from_secs(10), test::call_service(&app, req)).await;
    too_large(within("chunked")(resp), "chunked 4 MiB").await;
    let read = taken.load(Ordering::SeqCst);
    assert!(
        read <= (1 << 20) + CHUNK,
        "read {read} bytes of an oversize body"
    );

    // A complete, valid request padded past the limit: refused, and the handler never ran (the
    // single-use token is still good afterwards).
    let mut padded = serde_json::to_vec(&enroll_request(&token)).unwrap();
    padded.extend(std::iter::repeat_n(b' ', 3 << 20));
    let req = test::TestRequest::post()
        .uri("/api/v1/enroll")
        .insert_header(("Content-Type", "application/json"))
        .set_payload(padded)
        .to_request();
    too_large(test::call_service(&app, req).await, "padded 3 MiB").await;
    let req = test::TestRequest::post()
        .uri("/api/v1/enroll")
        .set_json(enroll_request(&token))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(
        resp.status(),
        200,
        "the refused request spent the join token"
    );
}

#[actix_web::test]
async fn a_bad_token_is_a_401_before_its_body_is_read_or_parsed() {
    let t = TestController::new();
    let (_, alice) = t.user("alice", "student");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let bad = "Bearer cohort_0000000000000000000000000000000000000000000000000000000000000000";
    for (method, uri, body) in [
        ("POST", "/api/v1/instances", "{not json".to_string()),
        (
            "POST",
            "/api/v1/me/ssh-keys",
            r#"{"surprise": 1}"#.to_string(),
        ),
        ("POST", "/api/v1/instances", " ".repeat(2 << 20)),
        ("PUT", "/api/v1/instances/x/files?path=/a", "x".into()),
    ] {
        let req = test::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(uri)
            .insert_header(("Authorization", bad))
            .insert_header(("Content-Type", "application/json"))
            .set_payload(body.clone())
            .to_request();
        let resp = test::call_service(&app, req).await;
        assert_eq!(
            resp.status(),
            401,
            "{method} {uri} with {} bytes",
            body.len()
        );
        let err: ErrorBody = test::read_body_json(resp).await;
        assert_eq!(err.error.code, "unauthenticated", "{err:?}");
    }

    // With a good token the same malformed body is the caller's 400, naming the body.
    let req = test::TestRequest::post()
        .uri("/api/v1/instances")
        .insert_header(("Authorization", format!("Bearer {alice}")))
        .set_payload("{not json")
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), 400);
    // And an oversize one a 413.
    let req = test::TestRequest::post()
        .uri("/api/v1/instances")
        .insert_header(("Authorization", format!("Bearer {alice}")))
        .set_payload(" ".repeat(2 << 20))
        .to_request();
    too_large(test::call_service(&app, req).await, "authenticated 2 MiB").await;
}

/// A wrong request: token, method, uri, body, and the answer's status and the field it names
/// (or its code when it names none).
type Case<'a> = (
    &'a str,
    &'a str,
    &'a str,
    Option<serde_json::Value>,
    u16,
    &'a str,
);

/// `base` with the keys of `extra` added.
fn merged(mut base: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    base
}

/// An answer as the one error shape: status, then the parsed body (or why it is not one).
async fn error_of(resp: actix_web::dev::ServiceResponse) -> (u16, Result<ErrorBody, String>) {
    let status = resp.status().as_u16();
    let body = test::read_body(resp).await;
    let err = serde_json::from_slice(&body).map_err(|e| {
        format!(
            "not the JSON error shape ({e}): {:?}",
            String::from_utf8_lossy(&body)
        )
    });
    (status, err)
}

#[actix_web::test]
async fn wrong_requests_get_a_json_4xx_naming_the_field() {
    let t = TestController::new();
    let (_, admin) = t.user("labadmin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    use serde_json::json;
    let instance = |extra| merged(json!({"name": "ok", "image": "base"}), extra);
    let course = |title: &str| json!({"code": "cs101", "title": title, "image": "base"});
    let user = |extra| merged(json!({"username": "alice", "role": "student"}), extra);
    let cases: Vec<Case> = vec![
        // Unknown routes, and path segments of the wrong type, are the JSON 404.
        (&admin, "GET", "/nope", None, 404, "not_found"),
        (&admin, "GET", "/api/v1/nope", None, 404, "not_found"),
        (
            &admin,
            "DELETE",
            "/api/v1/me/ssh-keys/abc",
            None,
            404,
            "not_found",
        ),
        (&admin, "PATCH", "/api/v1/users", None, 404, "not_found"),
        // A value of the wrong type names its field, nested ones by their path.
        (
            &admin,
            "POST",
            "/api/v1/instances",
            Some(instance(json!({"gpus": "two"}))),
            400,
            "gpus",
        ),
        (
            &admin,
            "POST",
            "/api/v1/instances",
            Some(instance(
                json!({"limits": {"cpu": "x", "memory_mib": 1, "disk_gib": 1}}),
            )),
            400,
            "limits.cpu",
        ),
        (
            &admin,
            "POST",
            "/api/v1/instances",
            Some(instance(
                json!({"limits": {"cpu": 1, "memory_mib": 1, "disk_gib": 1, "gpu": 1}}),
            )),
            400,
            "limits.gpu",
        ),
        (
            &admin,
            "POST",
            "/api/v1/instances",
            Some(instance(json!({"limits": {"cpu": 1, "memory_mib": 1}}))),
            400,
            "limits.disk_gib",
        ),
        (
            &admin,
            "POST",
            "/api/v1/instances",
            Some(instance(json!({"config": {"user.a": 1}}))),
            400,
            "config.user.a",
        ),
        // Course titles must say something, and say it in the order written.
        (
            &prof,
            "POST",
            "/api/v1/courses",
            Some(course("")),
            400,
            "title",
        ),
        (
            &prof,
            "POST",
            "/api/v1/courses",
            Some(course("   ")),
            400,
            "title",
        ),
        (
            &prof,
            "POST",
            "/api/v1/courses",
            Some(course("homework\u{202E}fdp.exe")),
            400,
            "title",
        ),
        (
            &prof,
            "POST",
            "/api/v1/courses",
            Some(course("a\u{2066}b")),
            400,
            "title",
        ),
        (
            &prof,
            "POST",
            "/api/v1/courses",
            Some(course("\u{200F}x")),
            400,
            "title",
        ),
        // An admin cannot make an account a roster would refuse.
        (
            &admin,
            "POST",
            "/api/v1/users",
            Some(json!({"username": "root", "role": "student"})),
            400,
            "username",
        ),
        (
            &admin,
            "POST",
            "/api/v1/users",
            Some(json!({"username": "Alice", "role": "student"})),
            400,
            "username",
        ),
        (
            &admin,
            "POST",
            "/api/v1/users",
            Some(user(json!({"full_name": "=HYPERLINK(\"x\")"}))),
            400,
            "full_name",
        ),
        (
            &admin,
            "POST",
            "/api/v1/users",
            Some(user(json!({"full_name": "evil\u{202E}txt"}))),
            400,
            "full_name",
        ),
        (
            &admin,
            "POST",
            "/api/v1/users",
            Some(user(json!({"email": "not an address"}))),
            400,
            "email",
        ),
    ];
    let mut wrong = Vec::new();
    for (token, method, uri, body, status, named) in cases {
        let mut req = test::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(uri)
            .insert_header(("Authorization", format!("Bearer {token}")));
        if let Some(body) = &body {
            req = req.set_json(body);
        }
        let (got, err) = error_of(test::call_service(&app, req.to_request()).await).await;
        let names = err
            .as_ref()
            .is_ok_and(|e| e.error.field.as_deref().unwrap_or(&e.error.code) == named);
        if got != status || !names {
            wrong.push(format!("{method} {uri} {body:?}: {got} {err:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} answers wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    let ok = test::TestRequest::post()
        .uri("/api/v1/users")
        .insert_header(("Authorization", format!("Bearer {admin}")))
        .set_json(user(
            json!({"full_name": "Alice Liddell", "email": "alice@example.org"}),
        ))
        .to_request();
    assert_eq!(
        test::call_service(&app, ok).await.status(),
        201,
        "a good user was refused"
    );
}

/// `PUT /courses/{code}/limits`: each value checked as a new course's, a 4xx naming the field,
/// only for the course's instructor or an admin, and nothing changed by a refused request; a
/// good one changes what it names, keeps the rest, and is audited.
#[actix_web::test]
async fn course_limits_are_checked_like_a_new_courses_and_refused_whole() {
    use serde_json::json;
    let t = TestController::new();
    let (_, admin) = t.user("labadmin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    let (_, other) = t.user("other", "instructor");
    let (_, alice) = t.user("alice", "student");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let send = |token: &str, method: &str, uri: &str, body: serde_json::Value| {
        test::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(uri)
            .insert_header(("Authorization", format!("Bearer {token}")))
            .set_json(body)
            .to_request()
    };
    let made = test::call_service(
        &app,
        send(
            &prof,
            "POST",
            "/api/v1/courses",
            to_json(&course("cs101", "Intro", "base")),
        ),
    )
    .await;
    assert_eq!(made.status(), 201);
    let limits = "/api/v1/courses/cs101/limits";
    let cases: Vec<(&str, &str, serde_json::Value, u16, &str)> = vec![
        (&prof, limits, json!({"cpu": 0}), 400, "cpu"),
        (&prof, limits, json!({"cpu": 257}), 400, "cpu"),
        (&prof, limits, json!({"cpu": "x"}), 400, "cpu"),
        (&prof, limits, json!({"cpu": -1}), 400, "cpu"),
        (&prof, limits, json!({"memory_mib": 32}), 400, "memory_mib"),
        (&prof, limits, json!({"memory_mib": 0}), 400, "memory_mib"),
        (
            &prof,
            limits,
            json!({"memory_mib": 1u64 << 21}),
            400,
            "memory_mib",
        ),
        (&prof, limits, json!({"disk_gib": 0}), 400, "disk_gib"),
        (&prof, limits, json!({"disk_gib": 20000}), 400, "disk_gib"),
        (
            &prof,
            limits,
            json!({"cpu": 2, "disk_gib": 0}),
            400,
            "disk_gib",
        ),
        (&prof, limits, json!({"cpu": 2, "gpus": 1}), 400, "gpus"),
        (&other, limits, json!({"cpu": 2}), 403, "forbidden"),
        (&alice, limits, json!({"cpu": 2}), 403, "forbidden"),
        (
            &prof,
            "/api/v1/courses/nope/limits",
            json!({"cpu": 2}),
            404,
            "not_found",
        ),
    ];
    let mut wrong = Vec::new();
    for (token, uri, body, status, named) in cases {
        let (got, err) =
            error_of(test::call_service(&app, send(token, "PUT", uri, body.clone())).await).await;
        let names = err
            .as_ref()
            .is_ok_and(|e| e.error.field.as_deref().unwrap_or(&e.error.code) == named);
        if got != status || !names {
            wrong.push(format!("{uri} {body}: {got} {err:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} answers wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    let get = || {
        test::TestRequest::get()
            .uri("/api/v1/courses/cs101")
            .insert_header(("Authorization", format!("Bearer {admin}")))
            .to_request()
    };
    let course: serde_json::Value = test::call_and_read_body_json(&app, get()).await;
    assert_eq!(
        (&course["cpu"], &course["memory_mib"], &course["disk_gib"]),
        (&json!(1), &json!(1024), &json!(10)),
        "a refused request changed nothing"
    );

    // A good one: what it names changes, the rest is kept; there is no container to reach.
    let change: serde_json::Value = test::call_and_read_body_json(
        &app,
        send(
            &prof,
            "PUT",
            limits,
            to_json(&CourseLimits {
                cpu: Some(2),
                memory_mib: Some(2048),
                disk_gib: None,
            }),
        ),
    )
    .await;
    assert_eq!(
        (
            &change["course"]["cpu"],
            &change["course"]["memory_mib"],
            &change["course"]["disk_gib"]
        ),
        (&json!(2), &json!(2048), &json!(10)),
        "{change}"
    );
    assert_eq!(change["kept"], json!([]));
    assert_eq!(change["operation"], serde_json::Value::Null);
    assert!(change["note"]
        .as_str()
        .is_some_and(|n| n.contains("made from now on")));
    let resp = test::call_service(
        &app,
        send(
            &admin,
            "PUT",
            limits,
            to_json(&CourseLimits {
                disk_gib: Some(20),
                ..Default::default()
            }),
        ),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let course: serde_json::Value = test::call_and_read_body_json(&app, get()).await;
    assert_eq!(
        (&course["cpu"], &course["memory_mib"], &course["disk_gib"]),
        (&json!(2), &json!(2048), &json!(20))
    );
    use cohort_controller::db::schema::audit_log;
    use diesel::prelude::*;
    let audited: Vec<String> = audit_log::table
        .filter(audit_log::action.eq("set_limits"))
        .filter(audit_log::object.eq("cs101"))
        .order(audit_log::id)
        .select(audit_log::actor)
        .load(&mut t.conn())
        .unwrap();
    assert_eq!(audited, ["prof", "labadmin"]);
}
