//! Warned before reclaimed (issue 43): before the reclaimer stops a container for idleness,
//! detaches its GPUs for idleness, or stops it for its longest run, it tells the student — in
//! their terminals inside the container (the budget's [`super::budget::tell`] path), on their
//! portal pages and through the API — and acts only once the course's `warn_minutes` have
//! passed and the reason still holds. Each warning is a row (`reclaim_warnings`), so a controller
//! restart neither repeats a warning nor acts before it is due. **Keep working** postpones the
//! reclaim once per warning: by one more idle window (the warning's minutes for the longest
//! run); real use ends the idle warning itself, and the next idle window may be kept again.

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
use crate::db::models::instance::Instance;
use crate::db::models::reclaim_warning::{ReclaimWarning, IDLE, MAX_RUNTIME};
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
    if reason == MAX_RUNTIME {
        format!(
            "Cohort: {instance} reaches its course's longest run: {what}. Keep working (on its \
             portal page) postpones this once."
        )
    } else {
        format!(
            "Cohort: {instance} has not been used for a while: {what}, unless it is used. Keep \
             working (on its portal page) postpones this once."
        )
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

/// `POST /instances/{name}/keep-working`: the container's owner only; postpones each pending
/// warning not yet kept, audited. 409 when none is pending or all were kept already.
pub async fn keep_working(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<WireWarning>> {
    let minute = Duration::seconds(ctl.config.reclaim.minute_s.max(1) as i64);
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
            for w in pending.iter().filter(|w| w.kept_at.is_none()) {
                let minutes = if w.reason == IDLE {
                    policy.idle_gpu_minutes.unwrap_or(policy.warn_minutes)
                } else {
                    policy.warn_minutes
                };
                let due = w.due_at + minute * minutes.max(1);
                if ReclaimWarning::keep(conn, i.id, &w.reason, due, now)? {
                    kept.push(json!({"reason": w.reason, "due_at": due}));
                }
            }
            if kept.is_empty() {
                return Err(ActionError::conflict(
                    None,
                    format!(
                        "Keep working was already used for this warning on {name}: it postpones \
                         a reclaim once; using the container keeps it"
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
