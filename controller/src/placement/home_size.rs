//! The size of a course student's home volume: its course's `home_mib`, or the controller's
//! `COHORT_DEFAULT_HOME_GIB`. The agent sets it as the volume's LXD `size` (a quota on the node's
//! pool: a btrfs qgroup limit, a ZFS quota), so a student who fills their home gets ENOSPC in
//! their own container and no classmate does; placement reserves it beside the root disk.

use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::models::course::Course;
use crate::db::models::course_home_snapshots::CourseHomeSnapshots;
use crate::db::models::instance::Instance;
use crate::error::{ActionError, ActionResult};

/// The smallest home a course may set, in MiB (a filesystem's metadata alone takes some).
pub const MIN_MIB: u64 = 32;
/// The largest, in MiB (16 TiB).
pub const MAX_MIB: u64 = 16 << 20;

/// Refuses a size outside [`MIN_MIB`]..=[`MAX_MIB`], naming `field`.
pub fn check(field: &str, mib: Option<u64>) -> ActionResult<()> {
    match mib {
        Some(m) if !(MIN_MIB..=MAX_MIB).contains(&m) => Err(ActionError::invalid(
            field,
            format!("must be {MIN_MIB} to {MAX_MIB} MiB"),
        )),
        _ => Ok(()),
    }
}

/// The home size, in MiB, of each student of `course`.
pub fn course_mib(course: &Course, config: &PlacementConfig) -> u64 {
    course
        .home_mib
        .map_or(u64::from(config.default_home_gib) << 10, |m| m as u64)
}

/// The home size, in MiB, of the instances of course `course_id`.
pub fn mib_of(
    conn: &mut PgConnection,
    course_id: i64,
    config: &PlacementConfig,
) -> QueryResult<u64> {
    let set = Course::home_mib(conn, course_id)?;
    Ok(set.map_or(u64::from(config.default_home_gib) << 10, |m| m as u64))
}

/// What placement reserves for a home of `mib`: whole GiB, rounded up.
pub fn reserved_gib(mib: u64) -> i64 {
    mib.div_ceil(1024) as i64
}

/// What placement reserves for a home of `mib` whose daemon keeps scheduled snapshots of it
/// (`snapshots`): the home, and as much again for its snapshots. A stated estimate: a snapshot
/// shares the blocks it has not seen change, so the snapshots take what changed over the kept
/// window, taken here as at most one home's worth (a class rewriting its whole home more often
/// than that is an outlier, and the home's own quota still holds).
pub fn reserved_with_snapshots(mib: u64, snapshots: bool) -> i64 {
    reserved_gib(mib) * if snapshots { 2 } else { 1 }
}

/// What each home of `course` reserves on its node's pool, its snapshots counted.
pub fn course_reserved_gib(
    conn: &mut PgConnection,
    course: &Course,
    config: &PlacementConfig,
) -> QueryResult<i64> {
    let snapshots = CourseHomeSnapshots::of(conn, course.id)?.is_some();
    Ok(reserved_with_snapshots(
        course_mib(course, config),
        snapshots,
    ))
}

/// Sets course `id`'s home size (`None`: the default), and what its instances reserve for their
/// homes (their nodes' counters follow by trigger).
pub fn set(
    conn: &mut PgConnection,
    id: i64,
    mib: Option<u64>,
    config: &PlacementConfig,
) -> QueryResult<()> {
    Course::set_home_mib(conn, id, mib.map(|m| m as i32))?;
    reserve(conn, id, config)
}

/// Has course `id`'s instances reserve what its homes, and their snapshots, take now.
pub fn reserve(conn: &mut PgConnection, id: i64, config: &PlacementConfig) -> QueryResult<()> {
    let snapshots = CourseHomeSnapshots::of(conn, id)?.is_some();
    let gib = reserved_with_snapshots(mib_of(conn, id, config)?, snapshots) as i32;
    Instance::set_home_gib_of_course(conn, id, gib)?;
    Ok(())
}

/// The custom volume holding a course student's home: it outlives resets and re-provisions.
pub fn home_volume(instance: &str) -> String {
    let name: String = format!("home-{instance}").chars().take(63).collect();
    name.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_and_reserved_in_whole_gib() {
        assert!(check("home_mib", Some(31)).is_err());
        assert!(check("home_mib", Some(MAX_MIB + 1)).is_err());
        assert!(check("home_mib", Some(64)).is_ok());
        assert!(check("home_mib", None).is_ok());
        assert_eq!(reserved_gib(64), 1);
        assert_eq!(reserved_gib(1024), 1);
        assert_eq!(reserved_gib(1025), 2);
        assert_eq!(reserved_with_snapshots(1025, false), 2);
        assert_eq!(reserved_with_snapshots(1025, true), 4);
    }
}
