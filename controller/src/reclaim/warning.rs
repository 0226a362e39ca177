//! Warned before reclaimed (issue 43): before the reclaimer stops a container for idleness,
//! detaches its GPUs for idleness, stops it for its longest run, ends its GPU lease or detaches
//! its GPU because the student's budget runs out, it tells the student — in
//! their terminals inside the container (the budget's [`super::budget::tell`] path), on their
//! portal pages and through the API — and acts only once the course's `warn_minutes` have
//! passed and the reason still holds. Each warning is a row (`reclaim_warnings`), so a controller
//! restart neither repeats a warning nor acts before it is due. **Keep working** postpones the
//! reclaim once per warning: by one more idle window (the warning's minutes for the longest
//! run); real use ends the idle warning itself, and the next idle window may be kept again. A
//! lease's end is kept by the warning's minutes, never past the course's longest lease
//! (`gpu_lease_max_hours` from its grant); a budget cannot be kept (hours are what it counts:
//! only a grant lifts it).

use chrono::{DateTime, Duration, Utc};
use cohort_proto::api::instances::ReclaimWarning as WireWarning;
use diesel::prelude::*;
use serde_json::json;

use super::budget::Notice;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_reclaim::CourseReclaim;
use crate::db::models::gpu_lease::{CourseGpuMode, GpuLease};
use crate::db::models::instance::Instance;
use crate::db::models::reclaim_warning::{ReclaimWarning, BUDGET, IDLE, LEASE_END, MAX_RUNTIME};
use crate::error::{ActionError, ActionResult};
use crate::instances::manage;

/// How many of the reclaimer's minutes ahead a reason on a `window`-minute limit is warned: the
/// course's `warn_minutes`, but half the window at most, so a short idle window (or a warning
/// longer than it) never warns a container the moment it starts or is last used.
pub fn ahead(warn_minutes: i32, window: i32) -> i32 {
    warn_minutes.clamp(0, window.max(0) / 2)
}

/// What the pass does about one reason on one container.
#[derive(Debug, PartialEq, Eq)]
pub enum Gate {
    /// The reason is not near: nothing to do (any old warning is forgotten).
    Clear,
    /// Warned now; the reclaim waits for the warning.
    Warned,
    /// Warned before, not yet due.
    Waiting,
    /// Due (or no warning asked for): reclaim now.
    Act,
}

/// One reason on one container, in the pass's transaction: `at` is when the reason holds (the
/// idle window's end, the longest run's end), `warn` the course's warning. The student is told
/// once `at - warn` has come (so a warning comes `warn` ahead where the pass can see it coming,
/// and `warn` before the act when the reason already holds), and the act waits until the
/// warning is due and `at` has come.
#[allow(clippy::too_many_arguments)]
pub fn gate(
    conn: &mut PgConnection,
    i: &Instance,
    reason: &str,
    action: &str,
    at: DateTime<Utc>,
    warn: Duration,
    now: DateTime<Utc>,
    course: &str,
    notices: &mut Vec<Notice>,
) -> QueryResult<Gate> {
    if at - warn > now {
        ReclaimWarning::clear(conn, i.id, reason)?;
        return Ok(Gate::Clear);
    }
    match ReclaimWarning::of(conn, i.id, reason)? {
        Some(w) if w.due_at <= now && at <= now => {
            ReclaimWarning::clear(conn, i.id, reason)?;
            Ok(Gate::Act)
        }
        Some(_) => Ok(Gate::Waiting),
        None if warn <= Duration::zero() => Ok(if at <= now { Gate::Act } else { Gate::Clear }),
        None => {
            let due = now + warn;
            ReclaimWarning::insert(conn, i.id, reason, action, now, due)?;
            audit::record(
                conn,
                super::ACTOR,
                AuditAction::ReclaimWarning,
                AuditObject::Instance,
                &i.name,
                json!({"course": course, "reason": reason, "action": action, "due_at": due}),
            )?;
            notices.push(Notice {
                instance: i.name.clone(),
                node_id: i.node_id,
                text: text(&i.name, reason, action, due),
            });
            Ok(Gate::Warned)
        }
    }
}

/// What the student's terminals are told.
pub fn text(instance: &str, reason: &str, action: &str, due: DateTime<Utc>) -> String {
    let when = due.format("%H:%M:%S UTC");
    let what = if action == "detach" {
        format!("its GPU will be detached at {when} (the container keeps running)")
    } else {
        format!("it will be stopped at {when}; save your work")
    };
    match reason {
        MAX_RUNTIME => format!(
            "Cohort: {instance} reaches its course's longest run: {what}. Keep working (on its \
             portal page) postpones this once."
        ),
        LEASE_END => format!(
            "Cohort: the GPU lease of {instance} ends: {what}. Keep working (on its portal page) \
             extends it once, up to the course's longest lease."
        ),
        BUDGET => format!(
            "Cohort: your GPU budget runs out: {instance}'s GPU will be detached at {when} (the \
             container keeps running). This cannot be postponed; your instructor can grant more \
             hours."
        ),
        _ => format!(
            "Cohort: {instance} has not been used for a while: {what}, unless it is used. Keep \
             working (on its portal page) postpones this once."
        ),
    }
}

/// Where Keep working moves warning `w` of `i`, if it can move it: one more idle window for
/// idleness, the warning's minutes for the longest run, the warning's minutes for a lease's end
/// but never past the course's longest lease from its grant; a budget never.
fn kept_due(
    conn: &mut PgConnection,
    i: &Instance,
    w: &ReclaimWarning,
    policy: &CourseReclaim,
    minute: Duration,
    hour_s: u64,
) -> QueryResult<Option<DateTime<Utc>>> {
    Ok(match w.reason.as_str() {
        BUDGET => None,
        IDLE => Some(
            w.due_at
                + minute
                    * policy
                        .idle_gpu_minutes
                        .unwrap_or(policy.warn_minutes)
                        .max(1),
        ),
        LEASE_END => {
            let Some(course_id) = i.course_id else {
                return Ok(None);
            };
            let lease = GpuLease::open_of(conn, i.id)?;
            let mode = CourseGpuMode::on_demand(conn, course_id)?;
            let (Some(lease), Some(mode)) = (lease, mode) else {
                return Ok(None);
            };
            let Some(granted) = lease.granted_at else {
                return Ok(None);
            };
            let longest = granted
                + Duration::milliseconds(
                    (mode.gpu_lease_max_hours * hour_s as f64 * 1000.0) as i64,
                );
            let due = (w.due_at + minute * policy.warn_minutes.max(1)).min(longest);
            (due > w.due_at).then_some(due)
        }
        _ => Some(w.due_at + minute * policy.warn_minutes.max(1)),
    })
}

/// Why Keep working cannot move warning `w`, for the 409 and the portal's banner.
pub fn not_kept_why(reason: &str) -> &'static str {
    match reason {
        BUDGET => {
            "a GPU budget cannot be postponed (it counts the hours held): the course's \
             instructor can grant more hours"
        }
        LEASE_END => {
            "the GPU lease already reaches the course's longest lease (gpu_lease_max_hours)"
        }
        _ => "Keep working was already used for this warning",
    }
}

fn wire(w: ReclaimWarning) -> WireWarning {
    WireWarning {
        reason: w.reason,
        action: w.action,
        warned_at: w.warned_at,
        due_at: w.due_at,
        kept_at: w.kept_at,
    }
}

/// `GET /instances/{name}/reclaim-warnings`: whoever may see the container.
pub async fn pending(
    ctl: &Controller,
    bearer: Bearer,
    name: String,
) -> ActionResult<Vec<WireWarning>> {
    ctl.db_as(bearer, move |conn, caller| {
        let i = manage::find(conn, &caller, &name)?;
        Ok(ReclaimWarning::pending(conn, i.id)?
            .into_iter()
            .map(wire)
            .collect())
    })
    .await
}

/// The pending warnings of `name` for a caller already known (the notebook origin's pass
/// holder, whom `crate::instances::notebook::authorize` let in).
pub async fn pending_for(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<WireWarning>> {
    ctl.db(move |conn| {
        let i = manage::find(conn, &caller, &name)?;
        Ok(ReclaimWarning::pending(conn, i.id)?
            .into_iter()
            .map(wire)
            .collect())
    })
    .await
}

/// `POST /instances/{name}/keep-working`: the container's owner only; postpones each pending
/// warning not yet kept, audited. 409 when none is pending or all were kept already.
pub async fn keep_working(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<WireWarning>> {
    let minute = Duration::seconds(ctl.config.reclaim.minute_s.max(1) as i64);
    let hour_s = ctl.config.reclaim.lease_hour_s.max(1);
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let i = manage::find(conn, &caller, &name)?;
            if i.owner_id != caller.user.id {
                return Err(ActionError::Forbidden(format!(
                    "only {name}'s owner may keep it working"
                )));
            }
            let pending = ReclaimWarning::pending(conn, i.id)?;
            if pending.is_empty() {
                return Err(ActionError::conflict(
                    None,
                    format!("no reclaim of {name} is announced: nothing to postpone"),
                ));
            }
            let policy = match i.course_id {
                Some(c) => CourseReclaim::of(conn, c)?.unwrap_or_default(),
                None => CourseReclaim::default(),
            };
            let now = crate::db::queries::coordination::clock(conn)?;
            let mut kept = Vec::new();
            let mut why_not = Vec::new();
            for w in pending.iter().filter(|w| w.kept_at.is_none()) {
                let Some(due) = kept_due(conn, &i, w, &policy, minute, hour_s)? else {
                    why_not.push(not_kept_why(&w.reason));
                    continue;
                };
                if ReclaimWarning::keep(conn, i.id, &w.reason, due, now)? {
                    if w.reason == LEASE_END {
                        // The lease itself runs on to the new due: its view says so and the
                        // queue's pass ends it then.
                        if let Some(lease) = GpuLease::open_of(conn, i.id)? {
                            GpuLease::extend(conn, lease.id, due)?;
                        }
                    }
                    kept.push(json!({"reason": w.reason, "due_at": due}));
                }
            }
            if kept.is_empty() {
                let why = why_not
                    .first()
                    .copied()
                    .unwrap_or_else(|| not_kept_why(IDLE));
                return Err(ActionError::conflict(
                    None,
                    format!(
                        "nothing to postpone on {name}: {why}; Keep working postpones a reclaim \
                         once, and using the container keeps it"
                    ),
                ));
            }
            audit::record(
                conn,
                caller.name(),
                AuditAction::KeepWorking,
                AuditObject::Instance,
                &name,
                json!({"postponed": kept}),
            )?;
            Ok(ReclaimWarning::pending(conn, i.id)?
                .into_iter()
                .map(wire)
                .collect())
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_comes_its_minutes_ahead_but_never_before_half_the_window() {
        assert_eq!(ahead(10, 60), 10);
        assert_eq!(
            ahead(10, 3),
            1,
            "a 3-minute window is warned 1 minute ahead"
        );
        assert_eq!(ahead(10, 1), 0, "too short to warn");
        assert_eq!(ahead(0, 60), 0, "no warning asked");
    }
}
