//! A course's staff: other instructors and teaching assistants who get its instructor's rights
//! (see [`super::course::teaches`]) but for deleting it and its quota. Only the course's own
//! instructor or an admin hands them out; a staff member needs the instructor role, so being
//! staff never lifts what an account's role allows. Audited.

use cohort_proto::api::courses::Course as WireCourse;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{owned, view};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_staff;
use crate::db::models::user::{role_name, User};
use crate::error::{ActionError, ActionResult};
use crate::validate;

/// `PUT /courses/{code}/staff/{username}` (add) or `DELETE` (remove); answers the course.
pub async fn change(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
    add: bool,
) -> ActionResult<WireCourse> {
    caller.require(Role::Instructor)?;
    validate::username("username", &username)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = owned(conn, &caller, &code)?;
            let user = User::by_username(conn, &username)?
                .ok_or_else(|| ActionError::invalid("username", format!("no user {username}")))?;
            if add {
                if user.id == course.instructor_id {
                    return Err(ActionError::invalid(
                        "username",
                        format!("{username} is the course's instructor"),
                    ));
                }
                if user.role() < Role::Instructor {
                    return Err(ActionError::invalid(
                        "username",
                        format!(
                            "{username} is a {}: course staff must hold the instructor role",
                            role_name(user.role())
                        ),
                    ));
                }
                course_staff::add(conn, course.id, user.id)?;
            } else if !course_staff::remove(conn, course.id, user.id)? {
                return Err(ActionError::NotFound(format!(
                    "{username} on the staff of course {code}"
                )));
            }
            audit::record(
                conn,
                caller.name(),
                if add {
                    AuditAction::AddStaff
                } else {
                    AuditAction::RemoveStaff
                },
                AuditObject::Course,
                &code,
                json!({ "user": username }),
            )?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}
