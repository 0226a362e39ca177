//! Issue 24: `DELETE /api/v1/courses/{code}` removes a course once it is torn down, for its
//! instructor or an admin only, audited; before the teardown, or while its containers are still
//! being deleted, it is refused and nothing changes. Through the API's real handlers.
//!
//! Issue 45: a course still holding its students' archived homes is refused (409 naming
//! `archives`) unless they are deleted with it (`?archives=delete`), files and all; deleting an
//! account deletes its archives' files too.

use actix_web::{test, web, App};
use cohort_controller::db::schema::{audit_log, courses, enrollments, instances, users};
use cohort_controller::http::api;
use cohort_e2e::bodies::{course, teardown, to_json};
use cohort_e2e::controller::TestController;
use diesel::prelude::*;
use serde_json::Value;

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
        let course = course(code, "Course", "base");
        let (status, body) = call!(&app, &prof, "POST", "/courses", json_body(to_json(&course)));
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
    let teardown = to_json(&teardown(true, false));
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

/// An archive row for `user` in `course` and its file in the store, as `cohort course archive`
/// leaves them; the file's path.
fn archived(t: &TestController, course: &str, user: &str) -> std::path::PathBuf {
    use cohort_controller::courses::archive::archive_path;
    use cohort_controller::db::models::course_archive::CourseArchive;
    let mut conn = t.conn();
    let course_id: i64 = courses::table
        .filter(courses::code.eq(course))
        .select(courses::id)
        .first(&mut conn)
        .unwrap();
    let user_id: i64 = users::table
        .filter(users::username.eq(user))
        .select(users::id)
        .first(&mut conn)
        .unwrap();
    let path = archive_path(&t.ctl, course, user).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"a home").unwrap();
    let sha = "0".repeat(64);
    let row = CourseArchive::put(
        &mut conn,
        course_id,
        user_id,
        path.to_str().unwrap(),
        &sha,
        6,
        90,
    );
    row.unwrap();
    path
}

#[actix_web::test]
async fn archived_homes_hold_a_course_back_until_deleted_with_it_and_go_with_their_student() {
    let t = TestController::new();
    let (_, admin) = t.user("admin", "admin");
    let (_, prof) = t.user("prof", "instructor");
    t.image("base");
    let app =
        test::init_service(App::new().configure(api::configure(web::Data::from(t.ctl.clone()))))
            .await;
    for code in ["ar1", "ar2"] {
        let course = course(code, "Course", "base");
        let (status, body) = call!(&app, &prof, "POST", "/courses", json_body(to_json(&course)));
        assert_eq!(status, 201, "{body}");
        let roster = "username,name,email,ssh_key\nbea,Bea,,\ncal,Cal,,\n".to_string();
        let path = format!("/courses/{code}/roster");
        let (status, body) = call!(&app, &prof, "POST", &path, Some(("text/csv", roster)));
        assert_eq!(status, 200, "{body}");
    }
    let teardown = to_json(&teardown(true, false));
    let (status, body) = call!(
        &app,
        &prof,
        "POST",
        "/courses/ar1/teardown",
        json_body(teardown)
    );
    assert_eq!(status, 202, "{body}");
    let (bea, cal) = (archived(&t, "ar1", "bea"), archived(&t, "ar1", "cal"));

    // Kept archives: refused, naming them; nothing goes.
    let (status, body) = call!(&app, &prof, "DELETE", "/courses/ar1", None);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["field"], "archives", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("2 archived homes") && m.contains("--delete-archives")),
        "{body}"
    );
    let (status, body) = call!(&app, &prof, "DELETE", "/courses/ar1?archives=gone", None);
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "archives", "{body}");
    let (status, _) = call!(&app, &prof, "GET", "/courses/ar1", None);
    assert_eq!(status, 200, "still there");
    assert!(bea.exists() && cal.exists());

    // Asked to: the course, its archive rows and files go, counted in the audit row.
    let (status, body) = call!(&app, &prof, "DELETE", "/courses/ar1?archives=delete", None);
    assert_eq!(status, 204, "{body}");
    assert!(
        !bea.exists() && !cal.exists(),
        "the files went with the rows"
    );
    assert!(
        !bea.parent().unwrap().exists(),
        "and the course's empty folder"
    );
    let mut conn = t.conn();
    let rows: i64 = cohort_controller::db::schema::course_archives::table
        .count()
        .get_result(&mut conn)
        .unwrap();
    assert_eq!(rows, 0);
    let details: Vec<Value> = audit_log::table
        .filter(audit_log::object.eq("ar1"))
        .filter(audit_log::action.eq("delete"))
        .select(audit_log::detail)
        .load(&mut conn)
        .unwrap();
    assert_eq!(details.len(), 1);
    assert_eq!(details[0]["archives"], 2, "{details:?}");

    // An account deleted: its archive's file goes, another student's stays.
    let (bea, cal) = (archived(&t, "ar2", "bea"), archived(&t, "ar2", "cal"));
    let (status, body) = call!(&app, &admin, "DELETE", "/users/bea", None);
    assert_eq!(status, 200, "{body}");
    assert!(!bea.exists(), "bea's archive went with her account");
    assert!(cal.exists(), "cal's stays");
}
