//! Issue 24: `DELETE /api/v1/courses/{code}` removes a course once it is torn down, for its
//! instructor or an admin only, audited; before the teardown, or while its containers are still
//! being deleted, it is refused and nothing changes. Through the API's real handlers.

use actix_web::{test, web, App};
use cohort_controller::db::schema::{audit_log, courses, enrollments, instances, users};
use cohort_controller::http::api;
use cohort_e2e::controller::TestController;
use diesel::prelude::*;
use serde_json::{json, Value};

macro_rules! call {
    ($app:expr, $token:expr, $method:expr, $path:expr, $body:expr) => {{
        let mut req = test::TestRequest::default()
            .method($method.parse().unwrap())
            .uri(&format!("/api/v1{}", $path))
            .insert_header(("authorization", format!("Bearer {}", $token)));
        let body: Option<(&str, String)> = $body;
        if let Some((kind, text)) = body {
            req = req.insert_header(("content-type", kind)).set_payload(text);
        }
        let res = test::call_service($app, req.to_request()).await;
        let status = res.status().as_u16();
        let bytes = test::read_body(res).await;
        (
            status,
            serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        )
    }};
}

fn json_body(v: Value) -> Option<(&'static str, String)> {
    Some(("application/json", v.to_string()))
}

#[actix_web::test]
async fn a_torn_down_course_is_deleted_by_its_instructor_or_an_admin_only() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    let (_, other) = t.user("other", "instructor");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    for code in ["cs1", "cs2"] {
        let course = json!({"code": code, "title": "Course", "image": "base"});
        let (status, body) = call!(&app, &prof, "POST", "/courses", json_body(course));
        assert_eq!(status, 201, "{body}");
        let roster = "username,name,email,ssh_key\nann,Ann,,\n".to_string();
        let path = format!("/courses/{code}/roster");
        let (status, body) = call!(&app, &prof, "POST", &path, Some(("text/csv", roster)));
        assert_eq!(status, 200, "{body}");
    }
    let student = {
        use cohort_controller::accounts::auth::{new_api_token, sha256};
        use cohort_controller::db::models::api_token::ApiToken;
        let mut conn = t.conn();
        let ann: i64 = users::table
            .filter(users::username.eq("ann"))
            .select(users::id)
            .first(&mut conn)
            .unwrap();
        let token = new_api_token();
        let expires = chrono::Utc::now() + chrono::Duration::days(1);
        ApiToken::insert(&mut conn, ann, None, &sha256(&token), expires).unwrap();
        token
    };

    // Active: refused, for everyone who may touch it; others may not even try.
    let (status, body) = call!(&app, &prof, "DELETE", "/courses/cs1", None);
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tear it down")),
        "{body}"
    );
    let (status, _) = call!(&app, &other, "DELETE", "/courses/cs1", None);
    assert_eq!(status, 403);
    let (status, _) = call!(&app, &student, "DELETE", "/courses/cs1", None);
    assert_eq!(status, 403);
    let (status, _) = call!(&app, &prof, "DELETE", "/courses/nope", None);
    assert_eq!(status, 404);

    // Torn down while a container is still being deleted: refused.
    let (status, body) = call!(&app, &prof, "POST", "/courses/cs2/provision", None);
    assert_eq!(status, 202, "{body}");
    let teardown = json!({"delete": true});
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/courses/cs2/teardown",
        json_body(teardown.clone())
    );
    assert_eq!(status, 202, "{body}");
    let (status, body) = call!(&app, &admin, "DELETE", "/courses/cs2", None);
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 containers")),
        "{body}"
    );

    // Torn down and empty: its instructor deletes it, audited; the student stays.
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/courses/cs1/teardown",
        json_body(teardown)
    );
    assert_eq!(status, 202, "{body}");
    let (status, body) = call!(&app, &prof, "DELETE", "/courses/cs1", None);
    assert_eq!(status, 204, "{body}");
    let (status, _) = call!(&app, &prof, "GET", "/courses/cs1", None);
    assert_eq!(status, 404);
    let mut conn = t.conn();
    let left: i64 = courses::table
        .filter(courses::code.eq("cs1"))
        .count()
        .get_result(&mut conn)
        .unwrap();
    assert_eq!(left, 0);
    let enrolled: i64 = enrollments::table.count().get_result(&mut conn).unwrap();
    assert_eq!(enrolled, 1, "cs2's enrollment stays, cs1's went");
    let ann: i64 = users::table
        .filter(users::username.eq("ann"))
        .count()
        .get_result(&mut conn)
        .unwrap();
    assert_eq!(ann, 1, "the student's account stays");
    let audited: Vec<(String, String)> = audit_log::table
        .filter(audit_log::object_kind.eq("course"))
        .filter(audit_log::object.eq("cs1"))
        .filter(audit_log::action.eq("delete"))
        .select((audit_log::actor, audit_log::action))
        .load(&mut conn)
        .unwrap();
    assert_eq!(audited, [("prof".to_string(), "delete".to_string())]);
    let cs2: i64 = instances::table.count().get_result(&mut conn).unwrap();
    assert_eq!(cs2, 1, "cs2's container is untouched by cs1's delete");
}
