//! `limits.processes` on every container: its course's `processes`, or the controller's
//! `COHORT_DEFAULT_PROCESSES`, so a fork bomb fills its own pids cgroup and no more. Its owner
//! may lower it; only an admin may raise it past that cap or unset it.

use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::models::course::Course;
use crate::db::models::instance::Instance;
use crate::error::{ActionError, ActionResult};

/// The LXD key.
pub const KEY: &str = "limits.processes";

/// The most processes the instance's container holds unless an admin says otherwise.
pub fn cap(
    conn: &mut PgConnection,
    instance: &Instance,
    config: &PlacementConfig,
) -> QueryResult<u32> {
    let course = match instance.course_id {
        Some(id) => Course::processes(conn, id)?,
        None => None,
    };
    Ok(course.map_or(config.default_processes, |n| n as u32))
}

/// Refuses, for anyone but an admin, a value above `cap` and the key's removal (no limit).
pub fn check(
    admin: bool,
    set: &std::collections::BTreeMap<String, String>,
    unset: &[String],
    cap: u32,
) -> ActionResult<()> {
    if admin {
        return Ok(());
    }
    if unset.iter().any(|k| k == KEY) {
        return Err(ActionError::invalid(
            &format!("unset.{KEY}"),
            format!("every container keeps a process limit (at most {cap})"),
        ));
    }
    if let Some(value) = set.get(KEY) {
        let ok = value.parse::<u32>().is_ok_and(|n| (1..=cap).contains(&n));
        if !ok {
            return Err(ActionError::invalid(
                &format!("config.{KEY}"),
                format!("must be 1 to {cap}"),
            ));
        }
    }
    Ok(())
}
