//! **Attach a GPU again** (issue 43): once the reclaimer has taken a running container's GPUs
//! (an idle detach, or a budget used up and then lifted by a grant), its student gets them back
//! in one step instead of restarting the container. The slots are taken again on the container's
//! node and its devices put back while it runs; with no room there, the operation waits, its
//! reason on the item, as a start does. A budget still used up is refused (a grant lifts it); an
//! on-demand course's containers ask for a lease instead.

use cohort_proto::api::instances::DesiredState;
use cohort_proto::api::operations::Operation as WireOperation;
use diesel::prelude::*;
use serde_json::json;

use super::budget::{hours, period_start, period_words, USED_UP};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject, StepKind};
use crate::db::models::course::Course;
use crate::db::models::course_budget::{used_seconds, CourseBudget, StudentBudget};
use crate::db::models::gpu_lease::CourseGpuMode;
use crate::db::models::instance::Instance;
use crate::db::queries::reclaim;
use crate::error::{ActionError, ActionResult};
use crate::instances::manage::find;
use crate::jobs::payload::Job;
use crate::jobs::{enqueue, Audit, Step};
use crate::views;

/// `POST /api/v1/instances/{name}/gpus/attach-again`: whoever may act on the container.
pub async fn attach_again(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<WireOperation> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            refused(conn, &instance)?;
            let op = enqueue(
                conn,
                &Job::AttachGpusAgain,
                Some(caller.user.id),
                &name,
                &[Step::new(StepKind::AttachGpus, &name, Some(instance.id))],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::AttachGpus,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({"again": true}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Why `instance`'s GPUs cannot be attached again now, if they cannot: a 409 saying so.
fn refused(conn: &mut PgConnection, instance: &Instance) -> ActionResult<()> {
    let name = &instance.name;
    let conflict = |why: String| Err(ActionError::conflict(None, why));
    if let Some(course_id) = instance.course_id {
        if CourseGpuMode::on_demand(conn, course_id)?.is_some() {
            return conflict(format!(
                "instance {name}'s course gives GPUs on demand: ask for a lease (cohort gpu \
                 attach {name})"
            ));
        }
    }
    if instance.gpu_count == 0 {
        return conflict(format!("instance {name} has no GPUs to attach"));
    }
    if instance.desired_state != DesiredState::Running || instance.node_id.is_none() {
        return conflict(format!(
            "instance {name} is not running: a start takes its GPUs again"
        ));
    }
    if reclaim::holds_gpus(conn, instance.id)? {
        return conflict(format!(
            "instance {name} holds its GPUs: nothing was taken to give back"
        ));
    }
    if let Some(why) = budget_used_up(conn, instance)? {
        return conflict(why);
    }
    Ok(())
}

/// The words of a GPU budget the container's student has used up this period, if so.
fn budget_used_up(conn: &mut PgConnection, instance: &Instance) -> QueryResult<Option<String>> {
    let Some(course_id) = instance.course_id else {
        return Ok(None);
    };
    let Some(budget) = CourseBudget::of(conn, course_id)? else {
        return Ok(None);
    };
    let course = Course::find(conn, course_id)?;
    let now = crate::db::queries::coordination::clock(conn)?;
    let start = period_start(&budget.budget_period, now, course.created_at);
    let student = StudentBudget::of(conn, course_id, instance.owner_id, start)?;
    let limit = budget.gpu_hours_per_student + student.granted_hours;
    let used = used_seconds(conn, course_id, instance.owner_id, start)? / 3600.0;
    Ok((used >= limit).then(|| {
        format!(
            "{USED_UP}: {} of {} GPU hours {} (course {}); the course's instructor can grant more",
            hours(used),
            hours(limit),
            period_words(&budget.budget_period),
            course.code
        )
    }))
}
