//! A course's GPU budget (issue 43): `gpu_hours_per_student` per `budget_period`, set when the
//! course is created or with `PUT /courses/{code}/budget`, and the extra hours its instructor,
//! staff or an admin grants one student for the current period (`POST /courses/{code}/grants`),
//! audited. The reclaimer enforces it (`crate::reclaim::budget`).

use cohort_proto::api::courses::{
    Course as WireCourse, CourseBudget as WireBudget, GpuHours, GrantHours, StudentBudget as Wire,
};
use diesel::prelude::*;
use serde_json::json;

use super::course::{view, writable};
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_budget::{
    budget_detached, used_seconds, CourseBudget, StudentBudget,
};
use crate::db::models::enrollment::Enrollment;
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::reclaim::budget::{period_start, MAX_HOURS, USED_UP};

/// Hours given for `field`: more than 0 and at most [`MAX_HOURS`], else a 400 naming it.
pub fn check_hours(field: &str, hours: GpuHours) -> ActionResult<f64> {
    let h = hours.0;
    if h.is_finite() && h > 0.0 && h <= MAX_HOURS {
        Ok(h)
    } else {
        Err(ActionError::invalid(
            field,
            format!("must be more than 0 and at most {MAX_HOURS} hours"),
        ))
    }
}

/// The budget a request asks for, checked: `None` for no budget.
pub fn checked(
    hours: Option<GpuHours>,
    period: Option<&str>,
) -> ActionResult<Option<(f64, String)>> {
    let period = match period {
        None => "week",
        Some(p @ ("week" | "month" | "course")) => p,
        Some(_) => {
            return Err(ActionError::invalid(
                "budget_period",
                "must be week, month or course",
            ))
        }
    };
    match hours {
        Some(h) => Ok(Some((
            check_hours("gpu_hours_per_student", h)?,
            period.to_string(),
        ))),
        None => Ok(None),
    }
}

/// Writes course `course_id`'s budget (a checked one, or none).
pub fn write(
    conn: &mut PgConnection,
    course_id: i64,
    budget: Option<(f64, String)>,
) -> QueryResult<()> {
    let row = budget.map(|(hours, period)| CourseBudget {
        course_id,
        gpu_hours_per_student: hours,
        budget_period: period,
    });
    CourseBudget::set(conn, course_id, row.as_ref())
}

/// What the course's view shows of its budget: hours and period, or neither.
pub fn shown(
    conn: &mut PgConnection,
    course_id: i64,
) -> QueryResult<(Option<GpuHours>, Option<String>)> {
    Ok(match CourseBudget::of(conn, course_id)? {
        Some(b) => (
            Some(GpuHours(b.gpu_hours_per_student)),
            Some(b.budget_period),
        ),
        None => (None, None),
    })
}

/// `PUT /courses/{code}/budget`.
pub async fn set(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: WireBudget,
) -> ActionResult<WireCourse> {
    if req.gpu_hours_per_student.is_none() && req.budget_period.is_some() {
        return Err(ActionError::invalid(
            "budget_period",
            "a budget period needs gpu_hours_per_student",
        ));
    }
    let budget = checked(req.gpu_hours_per_student, req.budget_period.as_deref())?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            write(conn, course.id, budget)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetBudget,
                AuditObject::Course,
                &code,
                json!(req),
            )?;
            Ok(view(conn, &course)?)
        })
    })
    .await
}

/// `POST /courses/{code}/grants`: extra hours for one enrolled student in the current period.
pub async fn grant(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: GrantHours,
) -> ActionResult<Wire> {
    let hours = check_hours("hours", req.hours)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let budget = CourseBudget::of(conn, course.id)?.ok_or_else(|| {
                ActionError::conflict(
                    Some("hours"),
                    format!("course {code} has no GPU budget (set gpu_hours_per_student first)"),
                )
            })?;
            let user = User::by_username(conn, &req.username)?
                .filter(|u| Enrollment::is_enrolled(conn, course.id, u.id).unwrap_or(false))
                .ok_or_else(|| {
                    ActionError::invalid(
                        "username",
                        format!("{} is not a student of {code}", req.username),
                    )
                })?;
            let now = crate::db::queries::coordination::clock(conn)?;
            let start = period_start(&budget.budget_period, now, course.created_at);
            let granted = StudentBudget::grant(conn, course.id, user.id, start, hours)?;
            // The budget's detach is lifted: the mark goes (the pass may take the GPU again at
            // the new limit) and a restart attaches the GPU again where it was given back.
            for id in budget_detached(conn, course.id, user.id, USED_UP)? {
                InstanceUsage::clear_detached(conn, id)?;
            }
            audit::record(
                conn,
                caller.name(),
                AuditAction::GrantGpuHours,
                AuditObject::User,
                &user.username,
                json!({"course": code, "hours": hours, "period_start": start}),
            )?;
            let used = used_seconds(conn, course.id, user.id, start)? / 3600.0;
            let row = StudentBudget::of(conn, course.id, user.id, start)?;
            Ok(Wire {
                course: code.clone(),
                username: user.username,
                period: budget.budget_period,
                period_start: start,
                budget_hours: GpuHours(budget.gpu_hours_per_student),
                granted_hours: GpuHours(granted),
                used_hours: GpuHours(used),
                warned_at: row.warned_at,
            })
        })
    })
    .await
}

/// One student's budget in course `course` now, when the course has one.
fn state(
    conn: &mut PgConnection,
    course: &crate::db::models::course::Course,
    user: &User,
) -> QueryResult<Option<Wire>> {
    let Some(budget) = CourseBudget::of(conn, course.id)? else {
        return Ok(None);
    };
    let now = crate::db::queries::coordination::clock(conn)?;
    let start = period_start(&budget.budget_period, now, course.created_at);
    let row = StudentBudget::of(conn, course.id, user.id, start)?;
    let used = used_seconds(conn, course.id, user.id, start)? / 3600.0;
    Ok(Some(Wire {
        course: course.code.clone(),
        username: user.username.clone(),
        period: budget.budget_period,
        period_start: start,
        budget_hours: GpuHours(budget.gpu_hours_per_student),
        granted_hours: GpuHours(row.granted_hours),
        used_hours: GpuHours(used),
        warned_at: row.warned_at,
    }))
}

/// The caller's own budgets, one per budgeted course they are enrolled in (the portal's
/// banner).
pub async fn mine(
    ctl: &Controller,
    bearer: crate::accounts::auth::Bearer,
) -> ActionResult<Vec<Wire>> {
    ctl.db_as(bearer, |conn, caller| {
        let mut out = Vec::new();
        for course in crate::db::models::course::Course::of_student(conn, caller.user.id)? {
            if let Some(b) = state(conn, &course, &caller.user)? {
                out.push(b);
            }
        }
        Ok(out)
    })
    .await
}
