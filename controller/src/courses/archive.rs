//! Archived homes, at a term's end: `cohort course archive CODE` (the course's staff or an
//! admin) enqueues one `archive_home` step per student's container, which streams the home's
//! files from its node into the archive store (`COHORT_ARCHIVE_DIR`, see
//! [`crate::jobs::archive`]). Each student downloads their own archive, the staff any of the
//! course's or the whole class as one tar, until the sweep ([`super::archive_sweep`]) deletes
//! it. Who may read which archive is decided here only.

use std::path::PathBuf;

use cohort_proto::api::course_archives::{ArchiveCourse, CourseArchive as WireArchive};
use cohort_proto::api::courses::{Course as WireCourse, CourseArchiveDays};
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{course_instances, writable};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::course_archive::{CourseArchive, NamedArchive};
use crate::db::models::enrollment::Enrollment;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::views;

/// Longest time an archive may be kept, in days (ten years).
const MAX_DAYS: u32 = 3650;

/// A number of days an archive may be kept: 1 to ten years, else a 400 naming `field`.
pub fn check_days(field: &str, days: u32) -> ActionResult<u32> {
    if days == 0 || days > MAX_DAYS {
        return Err(ActionError::invalid(
            field,
            format!("{days} is not a number of days from 1 to {MAX_DAYS}"),
        ));
    }
    Ok(days)
}

/// The days `course`'s archives are kept: its own `archive_days`, else the controller's
/// `COHORT_ARCHIVE_DAYS` (a course made before the setting).
pub fn days_of(conn: &mut PgConnection, course_id: i64, default: u32) -> ActionResult<u32> {
    Ok(CourseArchive::days_of(conn, course_id)?.map_or(default, |d| d.max(1) as u32))
}

/// A name that may be a path segment in the archive store (course codes and usernames are
/// checked where they are made; this keeps a bad row from naming a path outside the store).
fn segment(name: &str) -> ActionResult<&str> {
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']) {
        return Err(ActionError::Internal(format!(
            "{name:?} cannot name a file in the archive store"
        )));
    }
    Ok(name)
}

/// Where a student's archive of a course is kept: `<store>/<course>/<user>.tar.gz`.
pub fn archive_path(ctl: &Controller, course: &str, user: &str) -> ActionResult<PathBuf> {
    Ok(ctl
        .archive_dir()
        .join(segment(course)?)
        .join(format!("{}.tar.gz", segment(user)?)))
}

/// Deletes an archive's file whose row is gone. A file already gone is no error; one that
/// cannot be deleted is logged (the row, which named it, is gone either way).
pub fn remove_file(path: &std::path::Path) {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(path = %path.display(), error = %e, "cannot delete an archive");
        }
        _ => {}
    }
}

/// Deletes the files of archives whose rows went with their course or their student, and a
/// course's folder in the store once it holds nothing.
pub fn remove_files(ctl: &Controller, archives: &[NamedArchive]) {
    for found in archives {
        let Ok(path) = archive_path(ctl, &found.course, &found.user) else {
            continue;
        };
        remove_file(&path);
        // Only an empty folder goes: another student's archive may still be there.
        if let Some(dir) = path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

pub fn wire(a: NamedArchive) -> WireArchive {
    WireArchive {
        course: a.course,
        user: a.user,
        sha256: a.archive.sha256,
        size_bytes: a.archive.size_bytes.max(0) as u64,
        created_at: a.archive.created_at,
        expires_at: a.archive.expires_at,
    }
}

/// `POST /api/v1/courses/{code}/archive`: every student's home exported into the archive
/// store, kept `days` (default the course's `archive_days`). A student archived before gets a
/// new archive in place of the old.
pub async fn archive(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: ArchiveCourse,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    if let Some(days) = req.days {
        check_days("days", days)?;
    }
    let default = ctl.config.server.archive_days;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let days = match req.days {
                Some(days) => days,
                None => days_of(conn, course.id, default)?,
            };
            enqueue_archive(conn, &caller, &course, days)
        })
    })
    .await
}

/// `PUT /api/v1/courses/{code}/archive-days` (its instructor, staff, admin): how long the
/// archives made from now on are kept; those already made keep their expiry. Audited.
pub async fn set_days(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: CourseArchiveDays,
) -> ActionResult<WireCourse> {
    let days = check_days("archive_days", req.archive_days)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let before = CourseArchive::days_of(conn, course.id)?;
            CourseArchive::set_days_of(conn, course.id, Some(days as i32))?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetArchiveDays,
                AuditObject::Course,
                &code,
                json!({ "archive_days": days, "before": before }),
            )?;
            Ok(super::course::view(conn, &course)?)
        })
    })
    .await
}

/// Records the archive operation of `course` (also a teardown's first steps' source).
pub fn enqueue_archive(
    conn: &mut PgConnection,
    caller: &Caller,
    course: &Course,
    days: u32,
) -> ActionResult<WireOperation> {
    let mut rows = Vec::new();
    for row in course_instances(conn, course.id)? {
        if Enrollment::is_enrolled(conn, course.id, row.owner_id)? {
            rows.push(row);
        }
    }
    let steps: Vec<Step<'_>> = rows
        .iter()
        .map(|r| Step::new(StepKind::ArchiveHome, &r.name, Some(r.id)))
        .collect();
    let op = enqueue(
        conn,
        &payload::Job::ArchiveCourse(payload::Archive {
            course: course.code.clone(),
            days,
        }),
        Some(caller.user.id),
        &course.code,
        &steps,
        Some(Audit {
            actor: caller.name(),
            action: AuditAction::Archive,
            object_kind: AuditObject::Course,
            object: &course.code,
            detail: json!({ "homes": rows.len(), "days": days }),
        }),
    )?;
    Ok(views::operation(conn, &op)?)
}

/// The course, and whether the caller is its staff or an admin.
fn course_for(
    conn: &mut PgConnection,
    caller: &Caller,
    code: &str,
) -> ActionResult<(Course, bool)> {
    let course = Course::by_code(conn, code)?
        .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?;
    let staff = caller.is_admin()
        || (caller.role >= Role::Instructor
            && crate::db::models::course_staff::teaches(conn, course.id, caller.user.id)?);
    Ok((course, staff))
}

/// `GET /api/v1/courses/{code}/archive`: the course's archives (staff, admin).
pub async fn list(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Vec<WireArchive>> {
    ctl.db(move |conn| {
        let (course, staff) = course_for(conn, &caller, &code)?;
        if !staff {
            return Err(ActionError::Forbidden(format!(
                "course {code}'s archives are its staff's"
            )));
        }
        Ok(CourseArchive::of_course(conn, course.id)?
            .into_iter()
            .map(wire)
            .collect())
    })
    .await
}

/// The caller's own archives, of every course (their portal page).
pub async fn mine(ctl: &Controller, caller: Caller) -> ActionResult<Vec<WireArchive>> {
    ctl.db(move |conn| {
        Ok(CourseArchive::of_user(conn, caller.user.id)?
            .into_iter()
            .map(wire)
            .collect())
    })
    .await
}

/// A stored archive to send: its file and what was recorded of it.
pub struct ArchiveFile {
    pub path: PathBuf,
    pub archive: WireArchive,
}

/// `GET /api/v1/courses/{code}/archive/{user}`: a student's own archive, or any of the course's
/// for its staff and admins; another student's is 403.
pub async fn download(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
) -> ActionResult<ArchiveFile> {
    let found = ctl
        .db(move |conn| {
            let (course, staff) = course_for(conn, &caller, &code)?;
            if !staff && caller.user.username != username {
                return Err(ActionError::Forbidden(format!(
                    "only {username}, course {code}'s staff and admins may download \
                     {username}'s archive"
                )));
            }
            let not_found = || {
                ActionError::NotFound(format!("an archive of {username}'s home in course {code}"))
            };
            let user = User::by_username(conn, &username)?.ok_or_else(not_found)?;
            CourseArchive::find(conn, course.id, user.id)?.ok_or_else(not_found)
        })
        .await?;
    Ok(ArchiveFile {
        path: archive_path(ctl, &found.course, &found.user)?,
        archive: wire(found),
    })
}

/// `GET /api/v1/courses/{code}/archive.tar` (staff, admin): every student's archive of the
/// course, the files to put in one tar in order.
pub async fn class(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Vec<ArchiveFile>> {
    let archives = list(ctl, caller, code).await?;
    archives
        .into_iter()
        .map(|a| {
            Ok(ArchiveFile {
                path: archive_path(ctl, &a.course, &a.user)?,
                archive: a,
            })
        })
        .collect()
}
