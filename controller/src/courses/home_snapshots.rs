//! A course's home snapshots (`home_snapshots = off|daily|hourly`, `home_snapshots_keep = N`):
//! the daemon's own schedule and expiry on each student's home volume make and prune them, so
//! they go on while the controller is down. A home made from now on takes the schedule with
//! its container; the homes already made take it through an operation with one
//! `set_home_snapshots` item per container (agent calls that change a node run only as job steps).

use cohort_proto::agent::{HomeSnapshots, SnapshotEvery};
use cohort_proto::api::courses::{CourseHomeSnapshots as Change, CourseHomeSnapshotsChange};
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use super::course::{course_instances, view, writable};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_home_snapshots::CourseHomeSnapshots;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue_each, payload, StepKind};
use crate::views;

/// How many scheduled snapshots a home keeps when the course does not say.
pub const DEFAULT_KEEP: u32 = 7;
/// The most a course may keep: each is counted against its node's pool (see placement).
pub const MAX_KEEP: u32 = 100;

/// The schedule a request asks for, on top of `current` (a field left out keeps its value):
/// `None` is off. A bad value is a 400 naming its field.
pub fn parse(
    every: Option<&str>,
    keep: Option<u32>,
    current: Option<HomeSnapshots>,
) -> ActionResult<Option<HomeSnapshots>> {
    if let Some(k) = keep {
        if !(1..=MAX_KEEP).contains(&k) {
            return Err(ActionError::invalid(
                "home_snapshots_keep",
                format!("must be 1 to {MAX_KEEP}"),
            ));
        }
    }
    let every =
        match every.map(str::trim) {
            None => current.map(|c| c.every),
            Some("off") => None,
            Some(name) => Some(name.parse::<SnapshotEvery>().map_err(|_| {
                ActionError::invalid("home_snapshots", "must be off, daily or hourly")
            })?),
        };
    Ok(every.map(|every| HomeSnapshots {
        every,
        keep: keep.or(current.map(|c| c.keep)).unwrap_or(DEFAULT_KEEP),
    }))
}

/// The wire names of a schedule: `off` or its period, and how many are kept.
pub fn wire(schedule: Option<HomeSnapshots>) -> (String, Option<u32>) {
    match schedule {
        None => ("off".into(), None),
        Some(s) => (s.every.to_string(), Some(s.keep)),
    }
}

/// `PUT /api/v1/courses/{code}/home/snapshots` (its instructor or staff, admin).
pub async fn set(
    ctl: &Controller,
    caller: Caller,
    code: String,
    change: Change,
) -> ActionResult<CourseHomeSnapshotsChange> {
    // Checked before anything is read, so a bad value is refused whoever asks.
    parse(
        change.home_snapshots.as_deref(),
        change.home_snapshots_keep,
        None,
    )?;
    let placement = ctl.config.placement.clone();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let current = CourseHomeSnapshots::of(conn, course.id)?;
            let schedule = parse(
                change.home_snapshots.as_deref(),
                change.home_snapshots_keep,
                current,
            )?;
            CourseHomeSnapshots::set(conn, course.id, schedule)?;
            if current.is_none() && schedule.is_some() {
                // Some node must still hold one of its containers, snapshots counted.
                let need = super::provision::need(conn, &course, &placement)?;
                crate::placement::feasible::check(
                    conn,
                    &need,
                    None,
                    &placement,
                    // The disk is what snapshots add to: a node short of it names the field.
                    ["cpu", "memory_mib", "home_snapshots", "gpus", "gpu_model"],
                )?;
            }
            // Each home made reserves its snapshots' share too (see `home_size`).
            crate::placement::home_size::reserve(conn, course.id, &placement)?;
            let made: Vec<(String, i64)> = course_instances(conn, course.id)?
                .into_iter()
                .filter(|i| i.node_id.is_some() && i.desired_state != DesiredState::Deleted)
                .map(|i| (i.name, i.id))
                .collect();
            let job = payload::Job::SetCourseHomeSnapshots(payload::OfCourse {
                course: code.clone(),
            });
            let changed = if schedule == current {
                &[][..]
            } else {
                &made[..]
            };
            let operation = enqueue_each(
                conn,
                &job,
                Some(caller.user.id),
                &code,
                StepKind::SetHomeSnapshots,
                changed,
            )?
            .map(|op| views::operation(conn, &op))
            .transpose()?;
            let (every, keep) = wire(schedule);
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetHomeSnapshots,
                AuditObject::Course,
                &code,
                json!({
                    "home_snapshots": every,
                    "home_snapshots_keep": keep,
                    "operation": operation.as_ref().map(|o| o.id),
                }),
            )?;
            Ok(CourseHomeSnapshotsChange {
                course: view(conn, &course)?,
                operation,
            })
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(r: ActionResult<Option<HomeSnapshots>>) -> String {
        match r {
            Err(ActionError::Invalid { field, .. }) => field,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn values_are_checked_and_left_out_fields_kept() {
        let daily = |keep| HomeSnapshots {
            every: SnapshotEvery::Daily,
            keep,
        };
        assert_eq!(parse(None, None, None).unwrap(), None);
        assert_eq!(parse(Some("daily"), None, None).unwrap(), Some(daily(7)));
        assert_eq!(
            parse(None, Some(3), Some(daily(7))).unwrap(),
            Some(daily(3))
        );
        assert_eq!(parse(Some("off"), None, Some(daily(7))).unwrap(), None);
        assert_eq!(
            parse(Some("hourly"), None, Some(daily(5))).unwrap(),
            Some(HomeSnapshots {
                every: SnapshotEvery::Hourly,
                keep: 5
            })
        );
        assert_eq!(field(parse(Some("weekly"), None, None)), "home_snapshots");
        assert_eq!(
            field(parse(Some("daily"), Some(0), None)),
            "home_snapshots_keep"
        );
        assert_eq!(field(parse(None, Some(101), None)), "home_snapshots_keep");
    }
}
