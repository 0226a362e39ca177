//! Who may set `snapshots.*` config keys, and the bounds on a snapshot schedule. LXD makes
//! scheduled snapshots itself, past any check of the agent's (`snapshot_room`), so a student with
//! `snapshots.schedule=* * * * *` filled the pool. Students set none of these keys; an instructor
//! (of the instance's course) or an admin may schedule snapshots at most hourly, and every
//! schedule expires its snapshots: without `snapshots.expiry`, [`DEFAULT_EXPIRY`] is set with it.

use std::collections::BTreeMap;

use cohort_proto::api::users::Role;

use crate::accounts::auth::Caller;
use crate::error::{ActionError, ActionResult};

/// The expiry set with a schedule that names none: a week (at most 168 hourly snapshots).
pub const DEFAULT_EXPIRY: &str = "7d";

const SCHEDULE: &str = "snapshots.schedule";
const EXPIRY: &str = "snapshots.expiry";

/// Checks the `snapshots.*` keys a request sets (`set`, where the forced expiry is added) and
/// unsets, against what the instance has now (`current`).
pub fn apply(
    caller: &Caller,
    field: &str,
    set: &mut BTreeMap<String, String>,
    unset: &[String],
    current: &BTreeMap<String, String>,
) -> ActionResult<()> {
    let touched = set
        .keys()
        .chain(unset)
        .find(|k| k.starts_with("snapshots."));
    let Some(key) = touched else {
        return Ok(());
    };
    if caller.role < Role::Instructor {
        return Err(ActionError::Forbidden(format!(
            "{field}.{key}: students may not set snapshot keys (an instructor or an admin \
             schedules snapshots)"
        )));
    }
    if let Some(schedule) = set.get(SCHEDULE) {
        check_schedule(&format!("{field}.{SCHEDULE}"), schedule)?;
    }
    let after = |key: &str| -> Option<String> {
        if let Some(v) = set.get(key) {
            return Some(v.clone()).filter(|v| !v.is_empty());
        }
        if unset.iter().any(|k| k == key) {
            return None;
        }
        current.get(key).cloned().filter(|v| !v.is_empty())
    };
    let scheduled = after(SCHEDULE).is_some_and(|s| s != "@never");
    if scheduled && after(EXPIRY).is_none() {
        if unset.iter().any(|k| k == EXPIRY) || set.contains_key(EXPIRY) {
            return Err(ActionError::invalid(
                &format!("{field}.{EXPIRY}"),
                "a snapshot schedule needs an expiry: unset the schedule first",
            ));
        }
        set.insert(EXPIRY.into(), DEFAULT_EXPIRY.into());
    }
    Ok(())
}

/// `@hourly`, `@daily`, `@weekly`, `@monthly`, `@never`, or one cron expression whose minute is
/// a single number (at most once an hour).
fn check_schedule(field: &str, schedule: &str) -> ActionResult<()> {
    if schedule.is_empty()
        || matches!(
            schedule,
            "@hourly" | "@daily" | "@weekly" | "@monthly" | "@yearly" | "@annually" | "@never"
        )
    {
        return Ok(());
    }
    let fields: Vec<&str> = schedule.split_whitespace().collect();
    let hourly_at_most = fields.len() == 5
        && fields[0].parse::<u8>().is_ok_and(|m| m < 60)
        && !schedule.contains(',');
    if !hourly_at_most {
        return Err(ActionError::invalid(
            field,
            "a snapshot schedule is @hourly, @daily, @weekly, @monthly, @never or one cron \
             expression with a single minute (at most hourly)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_schedule;

    #[test]
    fn schedules_at_most_hourly() {
        for ok in ["@daily", "@hourly", "0 * * * *", "30 2 * * 1", ""] {
            assert!(check_schedule("s", ok).is_ok(), "{ok}");
        }
        for bad in [
            "* * * * *",
            "*/5 * * * *",
            "0,30 * * * *",
            "@startup",
            "0 * * *",
        ] {
            assert!(check_schedule("s", bad).is_err(), "{bad}");
        }
    }
}
