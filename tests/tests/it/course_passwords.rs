//! Generated student passwords (issue 25): the clear text is in the first endpoints export that
//! shows it and nowhere after (the account keeps only its crypt(3) hash); the course's
//! instructor issues a new one only to an account their roster created whose owner never set
//! credentials of their own.

use actix_web::{test, web, App};
use cohort_controller::courses::password;
use cohort_controller::db::schema::{audit_log, enrollments, users};
use cohort_controller::http::api;
use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::controller::TestController;
use cohort_e2e::ssh::SshKey;
use cohort_proto::api::users::{AddSshKey, CreateApiToken};
use diesel::prelude::*;
use serde_json::Value;

fn request(method: &str, path: &str, token: &str) -> test::TestRequest {
    test::TestRequest::default()
        .method(method.parse().expect("method"))
        .uri(path)
        .insert_header(("Authorization", format!("Bearer {token}")))
}

/// Sends a request to the app; (status, body as text).
macro_rules! send {
    ($app:expr, $req:expr $(,)?) => {
        async {
            let resp = test::call_service($app, $req.to_request()).await;
            let status = resp.status().as_u16();
            let body = test::read_body(resp).await;
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The `password` cell of `username`'s row in a CSV export.
fn password_in(csv: &str, username: &str) -> String {
    csv.lines()
        .find(|l| l.starts_with(&format!("{username},")))
        .unwrap_or_else(|| panic!("no row for {username} in {csv}"))
        .split(',')
        .nth(6)
        .expect("password cell")
        .to_string()
}

fn password_hash(conn: &mut PgConnection, username: &str) -> String {
    users::table
        .filter(users::username.eq(username))
        .select(users::password_hash)
        .first::<Option<String>>(conn)
        .expect("user")
        .expect("a password hash")
}

#[actix_web::test]
async fn a_generated_password_is_shown_once_and_reissued_only_to_a_roster_made_account() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    let (_, other_prof) = t.user("other", "instructor");
    // An account the roster did not make (and that has no key).
    t.user("older", "student");
    t.node("n1", (21000, 21100), 64, 256, false);
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let mut conn = t.conn();

    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course("cs101", "Intro", "base")
    };
    let (status, body) = send!(
        &app,
        request("POST", "/api/v1/courses", &prof).set_json(course)
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let key = SshKey::generate();
    let roster = format!(
        "username,name,email,ssh_key\nkeyless,K,,\nkeyed,KK,,{}\nolder,O,,\n",
        key.public_key()
    );
    let (status, body) = send!(
        &app,
        request("POST", "/api/v1/courses/cs101/roster", &prof)
            .insert_header(("content-type", "text/csv"))
            .set_payload(roster),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = send!(
        &app,
        request("POST", "/api/v1/courses/cs101/provision", &prof)
    )
    .await;
    assert_eq!(status, 202, "{body}");

    // An export without passwords keeps them for the one that shows them.
    let (status, _) = send!(
        &app,
        request(
            "GET",
            "/api/v1/courses/cs101/endpoints?format=known-hosts",
            &prof
        ),
    )
    .await;
    assert_eq!(status, 200);
    let (status, csv) = send!(
        &app,
        request("GET", "/api/v1/courses/cs101/endpoints", &prof)
    )
    .await;
    assert_eq!(status, 200, "{csv}");
    let first = password_in(&csv, "keyless");
    assert_eq!(first.len(), 16, "{csv}");
    assert!(password::verify(
        &first,
        &password_hash(&mut conn, "keyless")
    ));
    assert_eq!(password_in(&csv, "keyed"), "");

    // Shown once: the next export has none, and no clear password is left in the database.
    let (_, again) = send!(
        &app,
        request("GET", "/api/v1/courses/cs101/endpoints", &prof)
    )
    .await;
    assert_eq!(password_in(&again, "keyless"), "", "{again}");
    let (_, as_json) = send!(
        &app,
        request("GET", "/api/v1/courses/cs101/endpoints?format=json", &admin),
    )
    .await;
    assert!(
        !as_json.contains(&first) && !as_json.contains("password"),
        "{as_json}"
    );
    let clear: Vec<Option<String>> = enrollments::table
        .select(enrollments::initial_password)
        .load(&mut conn)
        .expect("enrollments");
    assert!(clear.iter().all(Option::is_none), "{clear:?}");

    // Re-issued by the course's instructor: a new password, its hash kept, shown in the answer.
    let path = "/api/v1/courses/cs101/students/keyless/password";
    let (status, body) = send!(&app, request("POST", path, &other_prof)).await;
    assert_eq!(status, 403, "another instructor: {body}");
    let (status, body) = send!(&app, request("POST", path, &prof)).await;
    assert_eq!(status, 201, "{body}");
    let issued = json_of(&body);
    let second = issued["password"].as_str().expect("password").to_string();
    assert_eq!(issued["username"], "keyless");
    assert_ne!(second, first);
    let hash = password_hash(&mut conn, "keyless");
    assert!(password::verify(&second, &hash) && !password::verify(&first, &hash));
    let (_, after) = send!(
        &app,
        request("GET", "/api/v1/courses/cs101/endpoints", &prof)
    )
    .await;
    assert_eq!(
        password_in(&after, "keyless"),
        "",
        "never in an export: {after}"
    );

    // Refused for an account with a key, one the roster did not make, and one not in the course.
    for (student, status, needle) in [
        ("keyed", 409, "own"),
        ("older", 409, "not created by this course's roster"),
        ("prof", 404, "not found"),
        ("nobody", 404, "not found"),
    ] {
        let path = format!("/api/v1/courses/cs101/students/{student}/password");
        let (got, body) = send!(&app, request("POST", &path, &prof)).await;
        assert_eq!(got, status, "{student}: {body}");
        assert!(body.contains(needle), "{student}: {body}");
        if status == 409 {
            assert_eq!(json_of(&body)["error"]["field"], "username", "{body}");
        }
    }

    // Once the student sets a key of their own, their credentials are theirs, even after they
    // remove it.
    let (status, body) = send!(
        &app,
        request("POST", "/api/v1/users/keyless/tokens", &admin).set_json(CreateApiToken::default()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let keyless = json_of(&body)["token"].as_str().expect("token").to_string();
    let own = SshKey::generate();
    let (status, body) = send!(
        &app,
        request("POST", "/api/v1/me/ssh-keys", &keyless).set_json(AddSshKey {
            public_key: own.public_key(),
        }),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let id = json_of(&body)["id"].as_i64().expect("key id");
    let (status, _) = send!(
        &app,
        request("DELETE", &format!("/api/v1/me/ssh-keys/{id}"), &keyless)
    )
    .await;
    assert_eq!(status, 204);
    let (status, body) = send!(&app, request("POST", path, &prof)).await;
    assert_eq!(status, 409, "{body}");
    assert!(password::verify(
        &second,
        &password_hash(&mut conn, "keyless")
    ));

    let actions: Vec<(String, String)> = audit_log::table
        .select((audit_log::actor, audit_log::action))
        .load(&mut conn)
        .expect("audit");
    for want in ["show_passwords", "reissue_password"] {
        assert!(
            actions
                .iter()
                .any(|(actor, action)| actor == "prof" && action == want),
            "{want} not audited: {actions:?}"
        );
    }
}

/// Issue 47, item 3: an account another instructor's roster made, once it is also in a second
/// course, or once its owner has signed in, is no instructor's to re-issue: the password would
/// open the other course's containers too.
#[actix_web::test]
async fn a_password_is_never_reissued_for_an_account_in_another_course_or_signed_in() {
    let t = TestController::new();
    let (_, prof_a) = t.user("profa", "instructor");
    let (_, prof_b) = t.user("profb", "instructor");
    t.node("n1", (21000, 21100), 64, 256, false);
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    let mut conn = t.conn();
    for (code, token) in [("csa", &prof_a), ("csb", &prof_b)] {
        let course = CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course(code, "T", "base")
        };
        let (status, body) = send!(
            &app,
            request("POST", "/api/v1/courses", token).set_json(course)
        )
        .await;
        assert_eq!(status, 201, "{body}");
    }
    let roster = |code: &str, token: &str, rows: &str| {
        request("POST", &format!("/api/v1/courses/{code}/roster"), token)
            .insert_header(("content-type", "text/csv"))
            .set_payload(format!("username,name,email,ssh_key\n{rows}"))
    };
    // B's roster makes both accounts; A's roster enrols `shared` as well (A's key ignored).
    let (status, body) = send!(&app, roster("csb", &prof_b, "shared,S,,\nsolo,O,,\n")).await;
    assert_eq!(status, 200, "{body}");
    let key = SshKey::generate();
    let (status, body) = send!(
        &app,
        roster("csa", &prof_a, &format!("shared,S,,{}\n", key.public_key()))
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let before = password_hash(&mut conn, "shared");

    // B may no longer re-issue `shared`'s password: it is in A's course too.
    let (status, body) = send!(
        &app,
        request(
            "POST",
            "/api/v1/courses/csb/students/shared/password",
            &prof_b
        )
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("another course"), "{body}");
    assert_eq!(json_of(&body)["error"]["field"], "username", "{body}");
    assert_eq!(password_hash(&mut conn, "shared"), before, "unchanged");

    // `solo`, only in B's course and never used, still can be re-issued; once its owner signs
    // in with it, no longer.
    let (status, body) = send!(
        &app,
        request(
            "POST",
            "/api/v1/courses/csb/students/solo/password",
            &prof_b
        )
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let issued = json_of(&body)["password"]
        .as_str()
        .expect("password")
        .to_string();
    cohort_controller::accounts::sign_in::password(&t.ctl, "solo".into(), issued, None)
        .await
        .expect("solo signs in with the issued password");
    let (status, body) = send!(
        &app,
        request(
            "POST",
            "/api/v1/courses/csb/students/solo/password",
            &prof_b
        )
    )
    .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("signed in"), "{body}");
}
