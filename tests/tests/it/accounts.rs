//! Issue 25's account items through the REST API: tokens expire (with a default), are listed
//! without their secret and revoked, by their user or an admin; an admin disables, enables and
//! deletes users, keeping or deleting their instances; every change is audited; failed
//! authentications are limited per source address (429) and audited.

use actix_web::{test, web, App};
use chrono::{Duration, Utc};
use cohort_controller::db::schema::{api_tokens, audit_log, courses, instances as inst, users};
use cohort_controller::http::api;
use cohort_controller::instances::manage as instances;
use cohort_e2e::bodies::{api_token, course, instance, limits, state_change, to_json, StateAction};
use cohort_e2e::controller::TestController;
use cohort_proto::api::instances::{CreateInstance, GpuShare, PlacementStrategy};
use cohort_proto::api::users::{AddSshKey, CreateApiToken};
use diesel::prelude::*;
use serde_json::{json, Value};

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

/// The request `method path` with `token` and an optional JSON body.
fn request(method: &str, path: &str, token: &str, body: Option<Value>) -> test::TestRequest {
    let req = test::TestRequest::default()
        .method(method.parse().expect("method"))
        .uri(path)
        .insert_header(("Authorization", format!("Bearer {token}")));
    match body {
        Some(body) => req.set_json(body),
        None => req,
    }
}

/// Sends [`request`] to the app; (status, JSON body or Null).
macro_rules! call {
    ($app:expr, $method:expr, $path:expr, $token:expr, $body:expr $(,)?) => {
        async {
            let resp =
                test::call_service($app, request($method, $path, $token, $body).to_request()).await;
            let status = resp.status().as_u16();
            let bytes = test::read_body(resp).await;
            (
                status,
                serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
            )
        }
    };
}

fn audited(conn: &mut PgConnection, actor: &str, action: &str, object: &str) -> bool {
    diesel::select(diesel::dsl::exists(
        audit_log::table
            .filter(audit_log::actor.eq(actor))
            .filter(audit_log::action.eq(action))
            .filter(audit_log::object.eq(object)),
    ))
    .get_result(conn)
    .expect("audit query")
}

#[actix_web::test]
async fn tokens_expire_by_default_and_are_listed_and_revoked_by_their_owner_or_an_admin() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, alice) = t.user("alice", "student");
    let (_, bob) = t.user("bob", "student");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let mut conn = t.conn();

    // A lifetime outside 1..=max is refused, naming the field, and makes no token.
    for days in [0, 366] {
        let (status, body) = call!(
            &app,
            "POST",
            "/api/v1/users/alice/tokens",
            &alice,
            Some(json!({"expires_in_days": days})),
        )
        .await;
        assert_eq!(status, 400, "{days}: {body}");
        assert_eq!(body["error"]["field"], "expires_in_days", "{body}");
    }
    let count = || {
        api_tokens::table
            .inner_join(users::table)
            .filter(users::username.eq("alice"))
            .count()
            .get_result::<i64>(&mut t.conn())
            .expect("count")
    };
    assert_eq!(count(), 1);

    // Without a lifetime the token lives the default 90 days; with one, that many.
    let before = Utc::now();
    let (status, laptop) = call!(
        &app,
        "POST",
        "/api/v1/users/alice/tokens",
        &alice,
        Some(to_json(&api_token("laptop"))),
    )
    .await;
    assert_eq!(status, 201, "{laptop}");
    let expires: chrono::DateTime<Utc> =
        serde_json::from_value(laptop["expires_at"].clone()).expect("expires_at");
    assert!(
        expires >= before + Duration::days(90) && expires <= Utc::now() + Duration::days(90),
        "{expires}"
    );
    let (status, short) = call!(
        &app,
        "POST",
        "/api/v1/users/alice/tokens",
        &alice,
        Some(to_json(&CreateApiToken {
            expires_in_days: Some(1),
            ..api_token("short")
        })),
    )
    .await;
    assert_eq!(status, 201, "{short}");
    let short_token = short["token"].as_str().expect("token").to_string();
    let laptop_token = laptop["token"].as_str().expect("token").to_string();
    assert_eq!(
        call!(&app, "GET", "/api/v1/me", &short_token, None).await.0,
        200
    );

    // Listed for alice and the admin, never with the secret; not for bob.
    let (status, listed) = call!(&app, "GET", "/api/v1/users/alice/tokens", &alice, None).await;
    assert_eq!(status, 200, "{listed}");
    let names: Vec<&str> = listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("-"))
        .collect();
    assert_eq!(names, ["-", "laptop", "short"]);
    assert!(!listed.to_string().contains(&laptop_token[..20]));
    assert!(listed
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t.get("token").is_none()));
    assert_eq!(
        call!(&app, "GET", "/api/v1/users/alice/tokens", &admin, None)
            .await
            .0,
        200
    );
    assert_eq!(
        call!(&app, "GET", "/api/v1/users/alice/tokens", &bob, None)
            .await
            .0,
        403
    );
    let short_id = short["id"].as_i64().expect("id");
    let path = format!("/api/v1/users/alice/tokens/{short_id}");
    assert_eq!(call!(&app, "DELETE", &path, &bob, None).await.0, 403);
    assert_eq!(
        call!(&app, "GET", "/api/v1/me", &short_token, None).await.0,
        200
    );

    // An expired token is refused like a forged one, and listed as expired.
    diesel::update(api_tokens::table.filter(api_tokens::id.eq(short_id)))
        .set(api_tokens::expires_at.eq(Utc::now() - Duration::seconds(1)))
        .execute(&mut conn)
        .expect("expire");
    let (status, body) = call!(&app, "GET", "/api/v1/me", &short_token, None).await;
    assert_eq!(status, 401, "{body}");
    let (_, listed) = call!(&app, "GET", "/api/v1/users/alice/tokens", &alice, None).await;
    let expired: Vec<bool> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["expired"].as_bool().expect("expired"))
        .collect();
    assert_eq!(expired, [false, false, true]);

    // Revoked: refused from the next request on; revoking twice is a 404.
    let laptop_id = laptop["id"].as_i64().expect("id");
    let path = format!("/api/v1/users/alice/tokens/{laptop_id}");
    assert_eq!(
        call!(&app, "GET", "/api/v1/me", &laptop_token, None)
            .await
            .0,
        200
    );
    assert_eq!(call!(&app, "DELETE", &path, &alice, None).await.0, 204);
    assert_eq!(
        call!(&app, "GET", "/api/v1/me", &laptop_token, None)
            .await
            .0,
        401
    );
    assert_eq!(call!(&app, "DELETE", &path, &alice, None).await.0, 404);
    // An admin revokes anyone's.
    let path = format!("/api/v1/users/alice/tokens/{short_id}");
    assert_eq!(call!(&app, "DELETE", &path, &admin, None).await.0, 204);
    assert_eq!(count(), 1);

    assert!(audited(&mut conn, "alice", "issue_token", "alice"));
    assert!(audited(&mut conn, "alice", "revoke_token", "alice"));
    assert!(audited(&mut conn, "admin", "revoke_token", "alice"));
}

#[actix_web::test]
async fn an_admin_disables_enables_and_deletes_users_keeping_or_deleting_their_instances() {
    let t = TestController::new();
    let (admin_caller, admin) = t.user("admin", "admin");
    let (prof_caller, prof) = t.user("prof", "instructor");
    let (_, alice) = t.user("alice", "student");
    let (_, bob) = t.user("bob", "student");
    t.image("base");
    for (name, owner) in [("alice-box", "alice"), ("bob-1", "bob"), ("bob-2", "bob")] {
        instances::create(&t.ctl, admin_caller.clone(), queued(name, owner))
            .await
            .expect("queued instance");
    }
    let mut conn = t.conn();
    diesel::insert_into(courses::table)
        .values((
            courses::code.eq("cs101"),
            courses::title.eq("Intro"),
            courses::instructor_id.eq(prof_caller.user.id),
        ))
        .execute(&mut conn)
        .expect("course");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;

    // Only an admin, and never on their own account.
    for token in [&prof, &bob] {
        let (status, _) = call!(&app, "POST", "/api/v1/users/alice/disable", token, None).await;
        assert_eq!(status, 403);
    }
    let (status, body) = call!(&app, "POST", "/api/v1/users/admin/disable", &admin, None).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["field"], "username");
    let (status, _) = call!(&app, "POST", "/api/v1/users/nobody/disable", &admin, None).await;
    assert_eq!(status, 404);

    // Disabled: every token of alice's is refused; enabled: accepted again.
    let (status, body) = call!(&app, "POST", "/api/v1/users/alice/disable", &admin, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["disabled_at"].is_string(), "{body}");
    assert_eq!(call!(&app, "GET", "/api/v1/me", &alice, None).await.0, 401);
    assert_eq!(
        call!(&app, "GET", "/api/v1/instances", &alice, None)
            .await
            .0,
        401
    );
    let (_, listed) = call!(&app, "GET", "/api/v1/users", &admin, None).await;
    let shown = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["username"] == "alice")
        .expect("alice listed");
    assert!(shown["disabled_at"].is_string(), "{shown}");
    let (status, body) = call!(&app, "POST", "/api/v1/users/alice/enable", &admin, None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["disabled_at"].is_null(), "{body}");
    assert_eq!(call!(&app, "GET", "/api/v1/me", &alice, None).await.0, 200);

    // A bad choice for the instances is a 400 naming it; nothing is deleted.
    let (status, body) = call!(
        &app,
        "DELETE",
        "/api/v1/users/alice?instances=maybe",
        &admin,
        None
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "instances", "{body}");
    assert_eq!(call!(&app, "GET", "/api/v1/me", &alice, None).await.0, 200);

    // An instructor who teaches a course is refused; a student cannot delete.
    let (status, body) = call!(
        &app,
        "DELETE",
        "/api/v1/users/prof?instances=keep",
        &admin,
        None
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("cs101"),
        "{body}"
    );
    assert_eq!(
        call!(&app, "DELETE", "/api/v1/users/alice", &bob, None)
            .await
            .0,
        403
    );

    // Keep: alice is gone, her instance stays, now the admin's and visible to them.
    let (status, body) = call!(
        &app,
        "DELETE",
        "/api/v1/users/alice?instances=keep",
        &admin,
        None
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kept"], json!(["alice-box"]), "{body}");
    assert_eq!(body["operations"], json!([]), "{body}");
    assert_eq!(call!(&app, "GET", "/api/v1/me", &alice, None).await.0, 401);
    let (status, shown) = call!(&app, "GET", "/api/v1/instances/alice-box", &admin, None).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["owner"], "admin", "{shown}");

    // Delete: bob is gone and each of his instances has a delete operation.
    let (status, body) = call!(
        &app,
        "DELETE",
        "/api/v1/users/bob?instances=delete",
        &admin,
        None
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kept"], json!([]), "{body}");
    assert_eq!(
        body["operations"].as_array().map(Vec::len),
        Some(2),
        "{body}"
    );
    let desired: Vec<String> = inst::table
        .filter(inst::name.like("bob-%"))
        .select(inst::desired_state)
        .load(&mut conn)
        .expect("bob's instances");
    assert_eq!(desired, ["deleted", "deleted"]);
    assert_eq!(call!(&app, "GET", "/api/v1/me", &bob, None).await.0, 401);
    let left: Vec<String> = users::table
        .order(users::username)
        .select(users::username)
        .load(&mut conn)
        .expect("users");
    assert_eq!(left, ["admin", "prof"]);

    for (action, object) in [
        ("disable", "alice"),
        ("enable", "alice"),
        ("delete", "alice"),
        ("delete", "bob"),
    ] {
        assert!(
            audited(&mut conn, "admin", action, object),
            "{action} {object}"
        );
    }
}

/// Real LXD, a real agent and real ssh: a disabled student's key stops opening their container
/// (its authorized_keys emptied, its password locked), works again once enabled, and stops for
/// good when the account is deleted with the container kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_disabled_or_deleted_students_key_no_longer_logs_in() {
    use cohort_e2e::cluster::Cluster;
    use cohort_e2e::ssh::SshKey;
    use reqwest::Method;

    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let alice = cluster.user("alice", "student").await;
    let key = SshKey::generate();
    let res = cluster
        .request(Method::POST, "/me/ssh-keys", &alice)
        .json(&AddSshKey {
            public_key: key.public_key(),
        })
        .send()
        .await
        .expect("add key");
    assert_eq!(res.status(), 201);
    let op: Value = cluster
        .request(Method::POST, "/instances", &alice)
        .json(&CreateInstance {
            limits: Some(limits(1, 256, 2)),
            ..instance("alice-box", "cohort/base")
        })
        .send()
        .await
        .expect("create")
        .json()
        .await
        .expect("operation");
    let op = cluster
        .wait_operation(
            op["id"].as_str().expect("id"),
            std::time::Duration::from_secs(300),
        )
        .await;
    assert_eq!(
        op["status"],
        "success",
        "{op}\n{}",
        cluster.controller_log()
    );
    let shown = cluster
        .admin(Method::GET, "/instances/alice-box", None)
        .await;
    let port = shown["ssh_port"].as_u64().expect("ssh port") as u16;
    let login = |timeout: u64| {
        key.run_when_up(
            "127.0.0.1",
            port,
            "alice",
            "whoami",
            std::time::Duration::from_secs(timeout),
        )
    };
    let out = login(120);
    assert!(
        out.status.success(),
        "alice cannot log in: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Issue 47, item 12: a key she planted for root (as anyone root in the container could)
    // logs in until she is disabled, which stops her containers.
    let planted = SshKey::generate();
    let plant = format!(
        "mkdir -p /root/.ssh && echo '{}' >> /root/.ssh/authorized_keys",
        planted.public_key().trim()
    );
    let out = cluster.nodes[0]
        .lxd
        .lxc_output(&["exec", "alice-box", "--", "sh", "-c", &plant]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = planted.run("127.0.0.1", port, "root", "true");
    assert!(
        out.status.success(),
        "the planted key logs in as root before: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    cluster
        .admin(Method::POST, "/users/alice/disable", None)
        .await;
    let refused = key.run("127.0.0.1", port, "alice", "true");
    assert_eq!(
        refused.status.code(),
        Some(255),
        "a disabled student still logs in: {}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let shown = cluster
        .admin(Method::GET, "/instances/alice-box", None)
        .await;
    assert_eq!(shown["desired_state"], "stopped", "{shown}");
    let mut stopped = false;
    for _ in 0..120 {
        let out = planted.run("127.0.0.1", port, "root", "true");
        if !out.status.success() {
            stopped = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        stopped,
        "the planted root key still logs in after alice was disabled"
    );
    let me = cluster
        .request(Method::GET, "/me", &alice)
        .send()
        .await
        .expect("me");
    assert_eq!(me.status(), 401);
    // Issue 47 (also): every answer tells the browser to use HTTPS only.
    assert_eq!(
        me.headers()
            .get("strict-transport-security")
            .and_then(|h| h.to_str().ok()),
        Some("max-age=31536000")
    );

    cluster
        .admin(Method::POST, "/users/alice/enable", None)
        .await;
    // Her containers stay stopped until someone starts them.
    let op = cluster
        .admin(
            Method::PUT,
            "/instances/alice-box/state",
            Some(to_json(&state_change(StateAction::Start))),
        )
        .await;
    let op = cluster
        .wait_operation(
            op["id"].as_str().expect("id"),
            std::time::Duration::from_secs(300),
        )
        .await;
    assert_eq!(op["status"], "success", "{op}");
    let out = login(120);
    assert!(
        out.status.success(),
        "enabled again, alice cannot log in: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let deleted = cluster
        .admin(Method::DELETE, "/users/alice?instances=keep", None)
        .await;
    assert_eq!(deleted["kept"], json!(["alice-box"]), "{deleted}");
    let refused = key.run("127.0.0.1", port, "alice", "true");
    assert_eq!(
        refused.status.code(),
        Some(255),
        "a deleted student still logs in"
    );
    let kept = cluster
        .admin(Method::GET, "/instances/alice-box", None)
        .await;
    assert_eq!(kept["owner"], "admin", "{kept}");
}

/// A client bound to the source address `source` (anything in 127.0.0.0/8 is this host) that
/// trusts the controller's CA.
fn client_from(state: &std::path::Path, source: [u8; 4]) -> reqwest::Client {
    let ca = std::fs::read(state.join("ca.crt")).expect("CA");
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA PEM"))
        .local_address(std::net::IpAddr::from(source))
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .expect("client")
}

/// Real HTTP to a real `cohort-controller serve`: a source that fails to authenticate 5 times in
/// a minute (bad tokens, a bad join secret) is answered 429 with Retry-After for the rest of
/// it, whatever it presents; another source is not; each failure is audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_are_limited_per_source_and_audited() {
    use cohort_e2e::cluster::Cluster;

    let cluster = Cluster::start_with_env(0, &[("COHORT_AUTH_FAILURES_PER_MINUTE", "5")]).await;
    let admin = &cluster.admin_token;
    let base = cluster.controller.url();
    let attacker = client_from(&cluster.controller_dir(), [127, 0, 0, 1]);
    let bystander = client_from(&cluster.controller_dir(), [127, 0, 0, 2]);

    for i in 0..4 {
        let res = attacker
            .get(format!("{base}/api/v1/me"))
            .bearer_auth(format!("cohort_guess{i}"))
            .send()
            .await
            .expect("answer");
        assert_eq!(res.status(), 401, "guess {i}");
    }
    // A guessed join secret with a well-formed CSR is a failed authentication too.
    let key = rcgen::KeyPair::generate().expect("key");
    let csr = rcgen::CertificateParams::new(vec!["n1".to_string()])
        .expect("params")
        .serialize_request(&key)
        .expect("CSR")
        .pem()
        .expect("CSR PEM");
    let res = attacker
        .post(format!("{base}/api/v1/enroll"))
        .json(
            &json!({"node_name": "n1", "secret": "guess", "csr_pem": csr,
                      "agent_url": "https://127.0.0.1:1", "ssh_host": "127.0.0.1",
                      "ssh_port_first": 1, "ssh_port_last": 2}),
        )
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status(), 401);

    // The sixth try is refused before it is looked at, even with the admin's good token.
    for token in ["cohort_guess5", admin] {
        let res = attacker
            .get(format!("{base}/api/v1/me"))
            .bearer_auth(token)
            .send()
            .await
            .expect("answer");
        assert_eq!(res.status(), 429);
        let retry: u64 = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("a Retry-After in seconds");
        assert!((1..=60).contains(&retry), "{retry}");
        let body: Value = res.json().await.expect("error body");
        assert_eq!(body["error"]["code"], "throttled", "{body}");
    }
    let res = attacker
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status(), 429, "/metrics is behind the same limit");

    // Another source is heard, and sees the failures in the audit log: five, the 429s not.
    let res = bystander
        .get(format!("{base}/api/v1/audit?limit=100"))
        .bearer_auth(admin)
        .send()
        .await
        .expect("answer");
    assert_eq!(res.status(), 200);
    let page: Value = res.json().await.expect("audit page");
    let failed: Vec<&Value> = page["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["action"] == "failed_sign_in")
        .collect();
    assert_eq!(failed.len(), 5, "{page}");
    assert!(failed.iter().all(|e| e["object"] == "127.0.0.1"), "{page}");
    assert!(
        failed.iter().any(|e| e["detail"]["path"] == "/api/v1/me"),
        "{page}"
    );
}

/// Issue 47, item 7: sign-in attempts made at once are counted before any is checked, so a
/// source gets no more guesses in a window by sending them together (the limit is 20).
#[actix_web::test]
async fn sign_in_guesses_sent_at_once_are_bounded_by_the_limit() {
    use cohort_controller::accounts::sign_in;
    use cohort_controller::error::ActionError;
    let t = TestController::new();
    t.user("victim", "student");
    sign_in::set_password(&mut t.conn(), "victim", "the right password").expect("password");
    let source = Some(std::net::IpAddr::from([192, 0, 2, 7]));
    let guesses =
        (0..41).map(|i| sign_in::password(&t.ctl, "victim".into(), format!("guess {i}"), source));
    let answers = futures_util::future::join_all(guesses).await;
    let checked = answers
        .iter()
        .filter(|a| matches!(a, Err(ActionError::Unauthenticated(_))))
        .count();
    let throttled = answers
        .iter()
        .filter(|a| matches!(a, Err(ActionError::Throttled { .. })))
        .count();
    assert_eq!((checked, throttled), (20, 21), "{answers:?}");
}

/// Issue 47, item 8: a flood of sign-ins with wrong passwords never holds the database pool
/// while it hashes: a signed-in user's request is answered while they are still being checked,
/// not after them.
#[actix_web::test]
async fn a_flood_of_sign_ins_leaves_the_pool_to_everyone_else() {
    use cohort_controller::accounts::sign_in;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let t = TestController::new();
    let (_, token) = t.user("busy", "student");
    t.user("victim", "student");
    sign_in::set_password(&mut t.conn(), "victim", "the right password").expect("password");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    const FLOOD: usize = 40;
    let done = AtomicUsize::new(0);
    let flood = futures_util::future::join_all((0..FLOOD).map(|i| {
        let done = &done;
        let ctl = &t.ctl;
        async move {
            // Each from its own address: the limit per source is not what is tested here.
            let source = std::net::IpAddr::from([198, 51, 100, i as u8]);
            let answer =
                sign_in::password(ctl, "victim".into(), format!("guess {i}"), Some(source)).await;
            done.fetch_add(1, Ordering::SeqCst);
            answer
        }
    }));
    let meanwhile = async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let asked = std::time::Instant::now();
        let answer = call!(&app, "GET", "/api/v1/me", &token, None).await;
        (answer, asked.elapsed())
    };
    let started = std::time::Instant::now();
    let (answers, ((status, body), waited)) = tokio::join!(flood, meanwhile);
    let flood_took = started.elapsed();
    assert!(answers.iter().all(Result::is_err), "no guess was right");
    assert_eq!(done.load(Ordering::SeqCst), FLOOD);
    assert_eq!(status, 200, "{body}");
    // Measured against the flood in the same run: a request that waited for the sign-ins'
    // hashing (as it did while they held the pool) takes most of the flood's time.
    assert!(
        waited * 4 < flood_took,
        "a signed-in request took {waited:?} while {FLOOD} sign-ins took {flood_took:?}"
    );
}

/// Issue 47, item 18: a sign-in as a name no account has costs what a wrong password does (one
/// argon2 verification), so its time does not tell whether the name exists.
#[actix_web::test]
async fn a_sign_in_takes_as_long_whether_or_not_the_name_exists() {
    use cohort_controller::accounts::sign_in;
    use std::time::{Duration, Instant};
    let t = TestController::new();
    t.user("known", "student");
    sign_in::set_password(&mut t.conn(), "known", "the right password").expect("password");
    // The quickest of three of each: the least disturbed by whatever else the machine does.
    let quickest = |name: &'static str| {
        let ctl = t.ctl.clone();
        async move {
            let mut best = Duration::MAX;
            for _ in 0..3 {
                let start = Instant::now();
                let answer = sign_in::password(&ctl, name.into(), "wrong guess".into(), None).await;
                assert!(answer.is_err());
                best = best.min(start.elapsed());
            }
            best
        }
    };
    let known = quickest("known").await;
    let unknown = quickest("nobody-here").await;
    assert!(
        unknown.as_secs_f64() > known.as_secs_f64() * 0.5,
        "unknown name {unknown:?} against a wrong password {known:?}"
    );
}

/// Issue 47, item 10: a token's name is bounded and must show something, and an account holds at
/// most 100 tokens, so neither a name nor the list grows without end.
#[actix_web::test]
async fn token_names_and_counts_are_bounded() {
    let t = TestController::new();
    let (_, token) = t.user("hoarder", "student");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let path = "/api/v1/users/hoarder/tokens";
    for name in [
        "x".repeat(500_000),
        "\u{200B}\u{200D}".into(),
        "a\u{7}b".into(),
    ] {
        let (status, body) = call!(&app, "POST", path, &token, Some(json!({"name": name}))).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(body["error"]["field"], "name", "{body}");
    }
    // The first token is the one the test user came with.
    for i in 1..100 {
        let (status, body) = call!(
            &app,
            "POST",
            path,
            &token,
            Some(to_json(&api_token(&format!("t{i}"))))
        )
        .await;
        assert_eq!(status, 201, "token {i}: {body}");
    }
    let (status, body) = call!(
        &app,
        "POST",
        path,
        &token,
        Some(to_json(&api_token("one more")))
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("revoke one"),
        "{body}"
    );
    let (status, listed) = call!(&app, "GET", path, &token, None).await;
    assert_eq!(status, 200);
    assert_eq!(listed.as_array().map(Vec::len), Some(100), "{listed}");
}

/// Issue 47 (also): an instructor's `GET /users` lists their own students and themselves, not
/// every account with its email; an admin's lists all.
#[actix_web::test]
async fn an_instructor_lists_only_their_own_students() {
    use cohort_controller::db::models::enrollment::Enrollment;
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    let (mine, _) = t.user("mine", "student");
    t.user("theirs", "student");
    t.user("otherprof", "instructor");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let (status, body) = call!(
        &app,
        "POST",
        "/api/v1/courses",
        &prof,
        Some(to_json(&course("ml1", "ML", "base")))
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let course: i64 = courses::table
        .filter(courses::code.eq("ml1"))
        .select(courses::id)
        .first(&mut t.conn())
        .unwrap();
    Enrollment::insert(&mut t.conn(), course, mine.user.id, None).unwrap();
    let names = |listed: &Value| -> Vec<String> {
        listed
            .as_array()
            .unwrap_or_else(|| panic!("{listed}"))
            .iter()
            .filter_map(|u| u["username"].as_str().map(String::from))
            .collect()
    };
    let (status, listed) = call!(&app, "GET", "/api/v1/users", &prof, None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(names(&listed), ["mine", "prof"]);
    let (_, listed) = call!(&app, "GET", "/api/v1/users", &admin, None).await;
    assert_eq!(
        names(&listed),
        ["admin", "mine", "otherprof", "prof", "theirs"]
    );
}
