//! A course's per-student limits changed after its creation (`PUT /courses/{code}/limits`):
//! cores, memory and root disk, checked as the course's creation checks them, then against
//! the nodes (some node must be able to hold one such container) and the course's quota.
//!
//! Who gets them: a container not made yet (a new student's; one waiting for a node or failed
//! for good) takes all three, its row changed at once. A container already made gets the new
//! cores and memory live where its node has room (`course_resize`), through an operation with
//! one item per container; its root disk keeps the size it was made with. Every container
//! left with other limits is listed in the answer with the reason, so an instructor is never
//! left to believe a change reached a container it did not reach.

use std::collections::HashMap;

use cohort_proto::api::courses::{CourseLimits, CourseLimitsChange, KeptLimits};
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use super::course::{check_size, course_instances, view, writable};
use super::provision::{check_quota, need};
use super::resize::{resize, Resize};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::image::Image;
use crate::db::models::instance::Instance;
use crate::error::ActionResult;
use crate::jobs::{enqueue_each, payload, StepKind};
use crate::placement::feasible;
use crate::{validate, views};

/// `PUT /api/v1/courses/{code}/limits` (its instructor, admin); a field left out is kept.
pub async fn set(
    ctl: &Controller,
    caller: Caller,
    code: String,
    limits: CourseLimits,
) -> ActionResult<CourseLimitsChange> {
    check_size(limits.cpu, limits.memory_mib, limits.disk_gib)?;
    let placement = ctl.config.placement.clone();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let found = writable(conn, &caller, &code)?;
            // Locked, so a provision beside this makes its rows with one size or the other.
            let course = Course::lock(conn, found.id)?;
            if let (Some(disk), Some(image)) = (limits.disk_gib, course.image_id) {
                let packed = Image::size_bytes(conn, image)?;
                validate::disk_for_image("disk_gib", disk, packed)?;
            }
            let changed = Course {
                cpu: limits.cpu.map_or(course.cpu, |v| v as i32),
                memory_mib: limits.memory_mib.map_or(course.memory_mib, |v| v as i64),
                disk_gib: limits.disk_gib.map_or(course.disk_gib, |v| v as i64),
                ..course.clone()
            };
            let need = need(conn, &changed, &placement)?;
            feasible::check(conn, &need, None, &placement, feasible::COURSE_FIELDS)?;
            check_quota(&changed, Enrollment::students(conn, course.id)?.len())?;
            Course::set_limits(
                conn,
                course.id,
                changed.cpu,
                changed.memory_mib,
                changed.disk_gib,
            )?;
            // Not on a node: nothing is made, nothing counts on a node's capacity, so the row
            // simply takes the new size (placement reads it).
            let waiting = Instance::resize_unplaced_of_course(
                conn,
                course.id,
                changed.cpu,
                changed.memory_mib,
                changed.disk_gib,
            )?;
            let mut live: Vec<(String, i64)> = Vec::new();
            let mut reasons: HashMap<String, String> = HashMap::new();
            for instance in course_instances(conn, course.id)? {
                if instance.node_id.is_none() || instance.desired_state == DesiredState::Deleted {
                    continue;
                }
                match resize(conn, instance.id, &changed, &placement)? {
                    Resize::Live => live.push((instance.name, instance.id)),
                    Resize::Same => {}
                    Resize::Kept(why) => {
                        reasons.insert(instance.name, why);
                    }
                }
            }
            let job = payload::Job::SetCourseLimits(payload::OfCourse {
                course: code.clone(),
            });
            let operation = enqueue_each(
                conn,
                &job,
                Some(caller.user.id),
                &code,
                StepKind::SetLimits,
                &live,
            )?
            .map(|op| views::operation(conn, &op))
            .transpose()?;
            let kept: Vec<KeptLimits> = keeping_other_limits(conn, &changed)?
                .into_iter()
                .map(|mut k| {
                    if let Some(why) = reasons.remove(&k.instance) {
                        k.reason = why;
                    }
                    k
                })
                .collect();
            let note = note(waiting.len(), live.len(), kept.len());
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetLimits,
                AuditObject::Course,
                &code,
                json!({
                    "limits": limits,
                    "operation": operation.as_ref().map(|o| o.id),
                    "waiting": waiting,
                    "live": live.iter().map(|(name, _)| name).collect::<Vec<_>>(),
                    "kept": kept.iter().map(|k| &k.instance).collect::<Vec<_>>(),
                }),
            )?;
            let course = writable(conn, &caller, &code)?;
            Ok(CourseLimitsChange {
                course: view(conn, &course)?,
                operation,
                kept,
                note,
            })
        })
    })
    .await
}

/// The containers of a course the caller may change that have other limits than the course's.
pub async fn kept_by(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Vec<KeptLimits>> {
    ctl.db(move |conn| {
        let course = writable(conn, &caller, &code)?;
        Ok(keeping_other_limits(conn, &course)?)
    })
    .await
}

/// The course's containers made on a node whose cores, memory or disk differ from the course's,
/// with the reason as far as their rows tell it (the change itself knows it more precisely).
fn keeping_other_limits(conn: &mut PgConnection, course: &Course) -> QueryResult<Vec<KeptLimits>> {
    let rows = Instance::placed_off_limits_of_course(
        conn,
        course.id,
        course.cpu,
        course.memory_mib,
        course.disk_gib,
    )?;
    Ok(rows
        .into_iter()
        .map(|(instance, owner, cpu, memory_mib, disk_gib)| {
            let reason = if cpu == course.cpu && memory_mib == course.memory_mib {
                "a root disk keeps the size it was made with".to_string()
            } else {
                "its node had no room, was not online, or it was being made or changed when the limits were set".to_string()
            };
            KeptLimits {
                instance,
                owner,
                cpu: cpu as u32,
                memory_mib: memory_mib as u64,
                disk_gib: disk_gib as u64,
                reason,
            }
        })
        .collect())
}

/// What the change reaches, in words, for the API's answer and the CLI.
fn note(waiting: usize, live: usize, kept: usize) -> String {
    let mut note = String::from("Containers made from now on take the new limits");
    if waiting > 0 {
        note.push_str(&format!(" ({waiting} waiting for a node take them now)"));
    }
    if live > 0 {
        note.push_str(&format!(
            "; {live} container(s) already made get the new cores and memory live (see the operation)"
        ));
    }
    if kept == 0 {
        note.push_str("; no container keeps other limits.");
    } else {
        note.push_str(&format!(
            "; {kept} container(s) keep other limits until they are deleted and provisioned again (see kept for why)."
        ));
    }
    note
}
