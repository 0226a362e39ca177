//! Removing a course for good, once it is torn down: its row, enrollments and reclaim policy go
//! (its students' accounts stay; they may be in other courses). Only its instructor or an admin
//! (not its staff),
//! only after a `teardown --delete` has removed every container, and audited.
//!
//! The students' archived homes are their work handed back: while any is kept, the delete is
//! refused unless it is asked to delete them too (`?archives=delete`); then their rows go with
//! the course and their files from the archive store once that is committed.

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
use crate::db::models::course_archive::CourseArchive;
use crate::db::models::enrollment::Enrollment;
use crate::error::{ActionError, ActionResult};

/// What a course's delete does with its students' archived homes (`?archives=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnArchives {
    /// The default: a course still holding archives is not deleted.
    Refuse,
    /// They are deleted with the course.
    Delete,
}

/// `?archives=` of a course's delete: absent, `keep` (refuse while there are any) or `delete`.
pub fn on_archives(value: Option<&str>) -> ActionResult<OnArchives> {
    match value.unwrap_or("keep") {
        "keep" => Ok(OnArchives::Refuse),
        "delete" => Ok(OnArchives::Delete),
        other => Err(ActionError::invalid(
            "archives",
            format!("{other:?} is not one of keep, delete"),
        )),
    }
}

/// `DELETE /api/v1/courses/{code}`.
pub async fn delete(
    ctl: &Controller,
    caller: Caller,
    code: String,
    on_archives: OnArchives,
) -> ActionResult<()> {
    caller.require(Role::Instructor)?;
    let archives = ctl.db(move |conn| {
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
            let archives = CourseArchive::of_course(conn, course.id)?;
            if let (Some(last), OnArchives::Refuse) = (
                archives.iter().map(|a| a.archive.expires_at).max(),
                on_archives,
            ) {
                return Err(ActionError::conflict(
                    Some("archives"),
                    format!(
                        "course {code} still holds {} archived homes (kept until {}): let its \
                         students download them, or delete them with the course \
                         (--delete-archives, ?archives=delete)",
                        archives.len(),
                        last.format("%Y-%m-%d"),
                    ),
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
                json!({"title": course.title, "students": students,
                       "archives": archives.len()}),
            )?;
            Ok(archives)
        })
    })
    .await?;
    // Their rows went with the course (ON DELETE CASCADE): now their files.
    super::archive::remove_files(ctl, &archives);
    Ok(())
}
