//! `course_home_snapshots`: how often the daemon snapshots a course's student homes and how many
//! of those snapshots it keeps; no row = off.

use cohort_proto::agent::{HomeSnapshots, SnapshotEvery};
use diesel::prelude::*;

use crate::db::schema::course_home_snapshots;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_home_snapshots, check_for_backend(diesel::pg::Pg))]
pub struct CourseHomeSnapshots {
    pub course_id: i64,
    pub every: SnapshotEvery,
    pub keep: i32,
}

impl CourseHomeSnapshots {
    /// The course's schedule, `None` when off.
    pub fn of(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<HomeSnapshots>> {
        Ok(course_home_snapshots::table
            .find(course_id)
            .select(CourseHomeSnapshots::as_select())
            .first(conn)
            .optional()?
            .map(|row| HomeSnapshots {
                every: row.every,
                keep: row.keep as u32,
            }))
    }

    /// Writes the course's schedule; `None` (off) removes its row.
    pub fn set(
        conn: &mut PgConnection,
        course_id: i64,
        schedule: Option<HomeSnapshots>,
    ) -> QueryResult<()> {
        let Some(s) = schedule else {
            diesel::delete(course_home_snapshots::table.find(course_id)).execute(conn)?;
            return Ok(());
        };
        let row = CourseHomeSnapshots {
            course_id,
            every: s.every,
            keep: s.keep as i32,
        };
        diesel::insert_into(course_home_snapshots::table)
            .values(&row)
            .on_conflict(course_home_snapshots::course_id)
            .do_update()
            .set((
                course_home_snapshots::every.eq(row.every),
                course_home_snapshots::keep.eq(row.keep),
            ))
            .execute(conn)
            .map(|_| ())
    }
}
