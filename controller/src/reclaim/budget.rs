//! GPU budgets (issue 43): a course's `gpu_hours_per_student` per `budget_period`, counted on
//! the **allocated** GPU-seconds of `gpu_usage_hours` (a GPU held is a GPU nobody else can have,
//! busy or not, so holding one is what a budget rations). Each reclaim pass looks at the running
//! containers of budgeted courses that hold GPUs: at 80 % of the student's limit (the course's
//! hours plus what was granted them this period) they are told once (recorded in
//! `student_budgets`, so a restart neither repeats nor skips it), `warn_minutes` before the
//! budget runs out they are warned as before any reclaim, at 100 % the GPU is detached
//! through the reclaimer's detach (the container keeps running), with the reason on the
//! instance and in the audit log. What is told reaches the student's open terminals inside the
//! container, written after the pass's transaction commits ([`tell`]).

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};
use cohort_proto::agent::ExecRequest;
use diesel::prelude::*;
use serde_json::json;

use crate::app::state::{connect_node, Controller};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::course_budget::{used_seconds, uses_gpu, CourseBudget, StudentBudget};
use crate::db::models::course_reclaim::CourseReclaim;
use crate::db::models::node::Node;
use crate::db::models::reclaim_warning::{ReclaimWarning, BUDGET};
use crate::db::queries::{capacity, reclaim};
use crate::reclaim::warning::{self, Gate};

/// The share of the limit at which the student is told.
pub const WARN_SHARE: f64 = 0.8;

/// The most hours a budget or a grant may be (more than a year of one GPU).
pub const MAX_HOURS: f64 = 10_000.0;

/// How a budget's detach reason begins (a grant that lifts it finds it so).
pub const USED_UP: &str = "GPU budget used up";

/// A message for the terminals of one container.
#[derive(Debug, Clone)]
pub struct Notice {
    pub instance: String,
    pub node_id: Option<i64>,
    pub text: String,
}

/// Where the current `period` began: Monday 00:00 UTC, the 1st of the month 00:00 UTC, or the
/// course's creation (no usage of the course is older).
pub fn period_start(
    period: &str,
    now: DateTime<Utc>,
    course_created: DateTime<Utc>,
) -> DateTime<Utc> {
    let day = now.date_naive();
    let first = match period {
        "month" => NaiveDate::from_ymd_opt(day.year(), day.month(), 1).unwrap_or(day),
        "course" => return course_created,
        _ => day - Duration::days(i64::from(day.weekday().num_days_from_monday())),
    };
    first.and_hms_opt(0, 0, 0).map_or(now, |t| t.and_utc())
}

/// "this week", "this month", "in this course".
pub fn period_words(period: &str) -> &'static str {
    match period {
        "month" => "this month",
        "course" => "in this course",
        _ => "this week",
    }
}

/// Hours as people write them: at most three decimals, no trailing zeros.
pub fn hours(h: f64) -> String {
    let s = format!("{h:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The budgets' part of a reclaim pass, in its transaction: returns how many GPUs it detached
/// and what to tell whom. A detach is warned the course's `warn_minutes` ahead (half the
/// budget at most) through [`warning::gate`]: when the hours used plus the GPUs held for the
/// warning's minutes reach the limit, the student is told when, and the detach waits for it.
pub fn pass(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    minute: Duration,
    actor: &str,
) -> QueryResult<(usize, Vec<Notice>)> {
    let mut acted = 0;
    let mut notices = Vec::new();
    let minute_s = minute.num_seconds().max(1) as f64;
    for budget in CourseBudget::all(conn)? {
        let course = Course::find(conn, budget.course_id)?;
        let start = period_start(&budget.budget_period, now, course.created_at);
        let when = period_words(&budget.budget_period);
        let warn_minutes = CourseReclaim::of(conn, budget.course_id)?
            .unwrap_or_default()
            .warn_minutes;
        for (i, _, _, detached, _) in reclaim::running_of_course(conn, budget.course_id)? {
            let holds = reclaim::holds_gpus(conn, i.id)? || uses_gpu(conn, i.id)?;
            if detached.is_some() || !holds {
                ReclaimWarning::clear(conn, i.id, BUDGET)?;
                continue;
            }
            let student = StudentBudget::of(conn, budget.course_id, i.owner_id, start)?;
            let limit = budget.gpu_hours_per_student + student.granted_hours;
            let used = used_seconds(conn, budget.course_id, i.owner_id, start)? / 3600.0;
            // When the budget runs out at the rate of the GPUs this container holds.
            let gpus = capacity::gpu_slots_held(conn, i.id)?.max(1) as f64;
            let left_ms = ((limit - used).max(0.0) * 3_600_000.0 / gpus) as i64;
            let at = now + Duration::milliseconds(left_ms);
            let warn = minute * warning::ahead(warn_minutes, (limit * 3600.0 / minute_s) as i32);
            let gate = warning::gate(
                conn,
                &i,
                BUDGET,
                "detach",
                at,
                warn,
                now,
                &course.code,
                &mut notices,
            )?;
            if gate == Gate::Act {
                let reason = format!(
                    "{USED_UP}: {} of {} GPU hours {when} (course {})",
                    hours(used),
                    hours(limit),
                    course.code
                );
                super::detach(conn, &i, &course.code, &reason)?;
                acted += 1;
                notices.push(Notice {
                    instance: i.name.clone(),
                    node_id: i.node_id,
                    text: format!(
                        "Cohort: your GPU budget of {} hours {when} is used up; the GPU was \
                         detached from {}, which keeps running. Your instructor can grant more hours.",
                        hours(limit),
                        i.name
                    ),
                });
            } else if used >= WARN_SHARE * limit
                && student.warned_limit_hours.is_none_or(|l| l < limit)
            {
                StudentBudget::mark_warned(conn, budget.course_id, i.owner_id, start, limit)?;
                audit::record(
                    conn,
                    actor,
                    AuditAction::BudgetWarning,
                    AuditObject::Instance,
                    &i.name,
                    json!({"course": course.code, "used_hours": used, "limit_hours": limit}),
                )?;
                notices.push(Notice {
                    instance: i.name.clone(),
                    node_id: i.node_id,
                    text: warning_text(used, limit, when, &i.name),
                });
            }
        }
    }
    Ok((acted, notices))
}

/// What the student is told at 80 %.
pub fn warning_text(used: f64, limit: f64, when: &str, instance: &str) -> String {
    format!(
        "Cohort: you have used {} of your {} GPU hours {when}. At {} hours the GPU is detached \
         from {instance} (the container keeps running).",
        hours(used),
        hours(limit),
        hours(limit)
    )
}

/// The shell that writes its first argument to every terminal in the container, as `wall`
/// does (without needing `wall` in the image): SSH sessions and JupyterLab terminals alike.
const TO_TERMINALS: &str = r#"for t in /dev/pts/[0-9]*; do [ -c "$t" ] && printf '\r\n%s\r\n' "$1" >"$t"; done 2>/dev/null; true"#;

/// Writes each notice to its container's terminals, through its node's agent (interactive I/O,
/// as an exec is). A node that cannot be reached is logged and skipped: the portal still
/// shows the state.
pub async fn tell(ctl: &Controller, notices: Vec<Notice>) {
    for n in notices {
        let Some(node_id) = n.node_id else { continue };
        let agents = ctl.agents.clone();
        let agent = ctl
            .db(move |conn| {
                let node = Node::find(conn, node_id)?;
                connect_node(agents.as_ref(), conn, &node)
            })
            .await;
        let agent = match agent {
            Ok(a) => a,
            Err(e) => {
                tracing::info!(instance = %n.instance, "telling its terminals: {e}");
                continue;
            }
        };
        let req = ExecRequest {
            timeout_s: Some(10),
            ..ExecRequest::new(vec![
                "/bin/sh".into(),
                "-c".into(),
                TO_TERMINALS.into(),
                "cohort-notice".into(),
                n.text.clone(),
            ])
        };
        let call = agent.exec(n.instance.clone(), req);
        match tokio::time::timeout(std::time::Duration::from_secs(15), call).await {
            Ok(Ok(r)) if r.exit_code == 0 => {
                tracing::info!(instance = %n.instance, "told its terminals: {}", n.text)
            }
            Ok(Ok(r)) => {
                tracing::info!(instance = %n.instance, code = r.exit_code, "telling its terminals failed")
            }
            Ok(Err(e)) => tracing::info!(instance = %n.instance, "telling its terminals: {e}"),
            Err(_) => tracing::info!(instance = %n.instance, "telling its terminals: no answer"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn periods_begin_on_monday_the_first_or_the_course() {
        // Friday 27 November 2026.
        let now = Utc.with_ymd_and_hms(2026, 11, 27, 15, 4, 5).unwrap();
        let created = Utc.with_ymd_and_hms(2026, 9, 1, 8, 0, 0).unwrap();
        assert_eq!(
            period_start("week", now, created),
            Utc.with_ymd_and_hms(2026, 11, 23, 0, 0, 0).unwrap()
        );
        assert_eq!(
            period_start("month", now, created),
            Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(period_start("course", now, created), created);
        assert_eq!(hours(0.01), "0.01");
        assert_eq!(hours(12.0), "12");
        assert_eq!(hours(0.0081), "0.008");
    }
}
