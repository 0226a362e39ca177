//! Removing a course for good, once it is torn down: its row, enrollments and reclaim policy go
//! (its students' accounts stay; they may be in other courses). Only its instructor or an admin
//! (not its staff),
//! only after a `teardown --delete` has removed every container, and audited.

use cohort_proto::api::courses::CourseState;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{course_instances, owned};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::enrollment::Enrollment;
use crate::error::{ActionError, ActionResult};

/// `DELETE /api/v1/courses/{code}`.
pub async fn delete(ctl: &Controller, caller: Caller, code: String) -> ActionResult<()> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = owned(conn, &caller, &code)?;
            // Read again under a lock: the state a teardown just set, never an older one.
            let course = Course::lock(conn, course.id)?;
            if course.state != CourseState::TornDown {
                return Err(ActionError::conflict(
                    None,
                    format!(
                        "course {code} is {}: tear it down with --delete first",
                        course.state
                    ),
                ));
            }
            let left = course_instances(conn, course.id)?.len();
            if left > 0 {
                return Err(ActionError::conflict(
                    None,
                    format!("course {code} still has {left} containers being deleted; wait for its teardown"),
                ));
            }
            let students = Enrollment::count(conn, course.id)?;
            Course::delete(conn, course.id)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Delete,
                AuditObject::Course,
                &code,
                json!({"title": course.title, "students": students}),
            )?;
            Ok(())
        })
    })
    .await
}
