//! Whole-course and per-student actions an instructor takes: teardown (stop or delete every
//! container), removing a student, and reset/start/stop/restart of one student's container.
//! Each is one operation; the worker's steps do the work. Snapshots of one student's container
//! are quick and answered directly, through the same agent calls as the instance routes.

use cohort_proto::api::courses::{CourseState, StudentAction, StudentSnapshot, Teardown};
use cohort_proto::api::instances::{CreateSnapshot, DesiredState, Snapshot};
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{course_instances, writable};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::course::Course;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::instance::Instance;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::instances::io;
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::views;

/// Stop (default) or delete every container of the course; a deleted course is `torn_down`.
pub async fn teardown(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: Teardown,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let rows = course_instances(conn, course.id)?;
            let action = if req.delete {
                StepKind::Delete
            } else {
                StepKind::Stop
            };
            for row in &rows {
                let desired = if req.delete {
                    DesiredState::Deleted
                } else {
                    DesiredState::Stopped
                };
                Instance::set_desired(conn, row.id, desired)?;
            }
            // An instance's items run in order: its home is archived before it stops or goes.
            let steps: Vec<Step<'_>> = rows
                .iter()
                .flat_map(|r| {
                    let archive = req
                        .archive
                        .then(|| Step::new(StepKind::ArchiveHome, &r.name, Some(r.id)));
                    archive
                        .into_iter()
                        .chain([Step::new(action, &r.name, Some(r.id))])
                })
                .collect();
            let op = enqueue(
                conn,
                &payload::Job::TeardownCourse(payload::Teardown {
                    delete: req.delete,
                    keep_homes: req.keep_homes,
                    force: true,
                    archive: req.archive,
                }),
                Some(caller.user.id),
                &code,
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Teardown,
                    object_kind: AuditObject::Course,
                    object: &code,
                    detail: json!({ "delete": req.delete, "archive": req.archive,
                                    "instances": rows.len()}),
                }),
            )?;
            if req.delete {
                Course::set_state(conn, course.id, CourseState::TornDown)?;
            }
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// The student (enrolled in `course`) and their container, if any.
fn student_of(
    conn: &mut PgConnection,
    course: &Course,
    username: &str,
) -> ActionResult<(User, Option<Instance>)> {
    let user = User::by_username(conn, username)?
        .filter(|u| Enrollment::is_enrolled(conn, course.id, u.id).unwrap_or(false))
        .ok_or_else(|| {
            ActionError::NotFound(format!("student {username} in course {}", course.code))
        })?;
    let instance = course_instances(conn, course.id)?
        .into_iter()
        .find(|i| i.owner_id == user.id);
    Ok((user, instance))
}

/// Unenrolls a student and deletes their container: the explicit removal a roster re-import
/// never does on its own. Their home volume goes too only with `delete_home`.
pub async fn remove_student(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
    delete_home: bool,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let (user, instance) = student_of(conn, &course, &username)?;
            Enrollment::delete(conn, course.id, user.id)?;
            let steps: Vec<Step<'_>> = instance
                .iter()
                .map(|i| Step::new(StepKind::Delete, &i.name, Some(i.id)))
                .collect();
            if let Some(i) = &instance {
                Instance::set_desired(conn, i.id, DesiredState::Deleted)?;
            }
            let op = enqueue(
                conn,
                &payload::Job::DeleteInstance(payload::Delete {
                    force: true,
                    delete_home,
                    ..Default::default()
                }),
                Some(caller.user.id),
                &format!("{code}/{username}"),
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::RemoveStudent,
                    object_kind: AuditObject::Course,
                    object: &code,
                    detail: json!({"student": username, "delete_home": delete_home}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Start, stop, restart or reset (delete and re-create from the template, keeping the home
/// volume) one student's container.
pub async fn student_action(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
    action: StudentAction,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let (_, instance) = student_of(conn, &course, &username)?;
            let instance = instance.ok_or_else(|| {
                ActionError::conflict(
                    None,
                    format!("{username} has no container yet: provision the course"),
                )
            })?;
            let (desired, actions): (DesiredState, &[StepKind]) = match action {
                StudentAction::Start => (DesiredState::Running, &[StepKind::Start]),
                StudentAction::Stop => (DesiredState::Stopped, &[StepKind::Stop]),
                StudentAction::Restart => (DesiredState::Running, &[StepKind::Restart]),
                StudentAction::Reset => {
                    (DesiredState::Running, &[StepKind::Reset, StepKind::Create])
                }
            };
            Instance::set_desired(conn, instance.id, desired)?;
            let steps: Vec<Step<'_>> = actions
                .iter()
                .map(|a| Step::new(*a, &instance.name, Some(instance.id)))
                .collect();
            let op = enqueue(
                conn,
                &payload::Job::ChangeInstanceState(payload::ChangeState {
                    force: true,
                    ..Default::default()
                }),
                Some(caller.user.id),
                &instance.name,
                &steps,
                Some(Audit {
                    actor: caller.name(),
                    action: match action {
                        StudentAction::Start => AuditAction::StudentStart,
                        StudentAction::Stop => AuditAction::StudentStop,
                        StudentAction::Restart => AuditAction::StudentRestart,
                        StudentAction::Reset => AuditAction::StudentReset,
                    },
                    object_kind: AuditObject::Instance,
                    object: &instance.name,
                    detail: json!({}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// The name of `username`'s container in course `code`, for the course's instructor.
async fn student_instance(
    ctl: &Controller,
    caller: &Caller,
    code: String,
    username: String,
) -> ActionResult<String> {
    caller.require(Role::Instructor)?;
    let caller = caller.clone();
    ctl.db(move |conn| {
        let course = writable(conn, &caller, &code)?;
        let (_, instance) = student_of(conn, &course, &username)?;
        instance.map(|i| i.name).ok_or_else(|| {
            ActionError::conflict(
                None,
                format!("{username} has no container yet: provision the course"),
            )
        })
    })
    .await
}

/// The snapshots of one student's container.
pub async fn student_snapshots(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
) -> ActionResult<Vec<Snapshot>> {
    let name = student_instance(ctl, &caller, code, username).await?;
    io::snapshots(ctl, caller, name).await
}

/// The default snapshot name: the UTC time, `-<n>` added when taken already.
fn default_snapshot_name(now: chrono::DateTime<chrono::Utc>, existing: &[Snapshot]) -> String {
    let base = now.format("snap-%Y%m%d-%H%M%S").to_string();
    std::iter::once(base.clone())
        .chain((1..).map(|n| format!("{base}-{n}")))
        .find(|name| existing.iter().all(|s| &s.name != name))
        .expect("an unused name")
}

/// Takes a snapshot of one student's container (named, or by the time).
pub async fn student_snapshot(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
    req: StudentSnapshot,
) -> ActionResult<Snapshot> {
    if let Some(name) = &req.name {
        crate::validate::instance_name("name", name)?;
    }
    let name = student_instance(ctl, &caller, code, username).await?;
    let snapshot = match req.name {
        Some(snapshot) => snapshot,
        None => {
            let existing = io::snapshots(ctl, caller.clone(), name.clone()).await?;
            default_snapshot_name(chrono::Utc::now(), &existing)
        }
    };
    io::create_snapshot(ctl, caller, name, CreateSnapshot { name: snapshot }).await
}

/// Restores one student's container to a named snapshot.
pub async fn student_restore(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
    snapshot: String,
) -> ActionResult<()> {
    crate::validate::instance_name("snapshot", &snapshot)?;
    let name = student_instance(ctl, &caller, code, username).await?;
    io::restore_snapshot(ctl, caller, name, snapshot).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(name: &str) -> Snapshot {
        serde_json::from_value(serde_json::json!({
            "name": name, "created_at": "2026-11-22T10:00:00Z", "stateful": false
        }))
        .expect("snapshot")
    }

    #[test]
    fn default_snapshot_names_are_timestamps_made_unique() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-22T10:15:30Z")
            .expect("time")
            .with_timezone(&chrono::Utc);
        assert_eq!(default_snapshot_name(now, &[]), "snap-20261122-101530");
        let taken = [snap("snap-20261122-101530"), snap("snap-20261122-101530-1")];
        assert_eq!(default_snapshot_name(now, &taken), "snap-20261122-101530-2");
    }
}
