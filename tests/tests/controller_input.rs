//! What the REST API refuses before it does any work: a body past its bound is a 413 without the
//! controller reading it (an anonymous caller cannot make it hold megabytes), and a bad token is a
//! 401 whatever its body holds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix_web::dev::Payload;
use actix_web::{test, web, App};
use base64::Engine;
use cohort_controller::actions::enroll::create_join_token;
use cohort_controller::api;
use cohort_e2e::controller::TestController;
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

/// An answer as the one error shape: status, then the parsed body.
async fn error_of(resp: actix_web::dev::ServiceResponse) -> (u16, ErrorBody) {
    let status = resp.status().as_u16();
    let body = test::read_body(resp).await;
    let err = serde_json::from_slice(&body).unwrap_or_else(|e| {
        panic!(
            "{status}: not the JSON error shape ({e}): {:?}",
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
    let as_ = |token: &str, method: &str, uri: &str, body: Option<serde_json::Value>| {
        let mut req = test::TestRequest::default()
            .method(method.parse().unwrap())
            .uri(uri)
            .insert_header(("Authorization", format!("Bearer {token}")));
        if let Some(body) = body {
            req = req.set_json(body);
        }
        req.to_request()
    };

    // Unknown routes, and path segments of the wrong type, are the JSON 404.
    for (method, uri) in [
        ("GET", "/nope"),
        ("GET", "/api/v1/nope"),
        ("DELETE", "/api/v1/me/ssh-keys/abc"),
        ("PATCH", "/api/v1/users"),
    ] {
        let (status, err) =
            error_of(test::call_service(&app, as_(&admin, method, uri, None)).await).await;
        assert_eq!(
            (status, err.error.code.as_str()),
            (404, "not_found"),
            "{method} {uri}"
        );
    }

    // A value of the wrong type names its field, nested ones by their path.
    for (body, field) in [
        (
            serde_json::json!({"name": "ok", "image": "base", "gpus": "two"}),
            "gpus",
        ),
        (
            serde_json::json!({"name": "ok", "image": "base", "limits": {"cpu": "x", "memory_mib": 1, "disk_gib": 1}}),
            "limits.cpu",
        ),
        (
            serde_json::json!({"name": "ok", "image": "base", "limits": {"cpu": 1, "memory_mib": 1, "disk_gib": 1, "gpu": 1}}),
            "limits.gpu",
        ),
        (
            serde_json::json!({"name": "ok", "image": "base", "limits": {"cpu": 1, "memory_mib": 1}}),
            "limits.disk_gib",
        ),
        (
            serde_json::json!({"name": "ok", "image": "base", "config": {"user.a": 1}}),
            "config.user.a",
        ),
    ] {
        let (status, err) = error_of(
            test::call_service(
                &app,
                as_(&admin, "POST", "/api/v1/instances", Some(body.clone())),
            )
            .await,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(err.error.field.as_deref(), Some(field), "{body}: {err:?}");
    }

    // Course titles must say something, and say it in the order written.
    for title in [
        "",
        "   ",
        "homework\u{202E}fdp.exe",
        "a\u{2066}b",
        "\u{200F}x",
    ] {
        let body = serde_json::json!({"code": "cs101", "title": title, "image": "base"});
        let (status, err) = error_of(
            test::call_service(&app, as_(&prof, "POST", "/api/v1/courses", Some(body))).await,
        )
        .await;
        assert_eq!(status, 400, "{title:?}");
        assert_eq!(
            err.error.field.as_deref(),
            Some("title"),
            "{title:?}: {err:?}"
        );
    }

    // An admin cannot make an account a roster would refuse.
    for (body, field) in [
        (
            serde_json::json!({"username": "root", "role": "student"}),
            "username",
        ),
        (
            serde_json::json!({"username": "Alice", "role": "student"}),
            "username",
        ),
        (
            serde_json::json!({"username": "alice", "role": "student", "full_name": "=HYPERLINK(\"x\")"}),
            "full_name",
        ),
        (
            serde_json::json!({"username": "alice", "role": "student", "full_name": "evil\u{202E}txt"}),
            "full_name",
        ),
        (
            serde_json::json!({"username": "alice", "role": "student", "email": "not an address"}),
            "email",
        ),
    ] {
        let (status, err) = error_of(
            test::call_service(
                &app,
                as_(&admin, "POST", "/api/v1/users", Some(body.clone())),
            )
            .await,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(err.error.field.as_deref(), Some(field), "{body}: {err:?}");
    }
    let ok = test::call_service(
        &app,
        as_(
            &admin,
            "POST",
            "/api/v1/users",
            Some(serde_json::json!({"username": "alice", "role": "student", "full_name": "Alice Liddell", "email": "alice@example.org"})),
        ),
    )
    .await;
    assert_eq!(ok.status(), 201, "a good user was refused");
}
