//! `course_reclaim`: a course's reclaim policy (GPU idleness, longest run); no row = never.

use diesel::prelude::*;

use crate::db::enums::IdleAction;
use crate::db::schema::course_reclaim;

#[derive(Debug, Clone, Default, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_reclaim, check_for_backend(diesel::pg::Pg))]
pub struct CourseReclaim {
    pub course_id: i64,
    pub idle_gpu_minutes: Option<i32>,
    pub idle_action: IdleAction,
    pub max_runtime_minutes: Option<i32>,
}

impl CourseReclaim {
    pub fn of(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<CourseReclaim>> {
        course_reclaim::table
            .find(course_id)
            .select(CourseReclaim::as_select())
            .first(conn)
            .optional()
    }

    pub fn all(conn: &mut PgConnection) -> QueryResult<Vec<CourseReclaim>> {
        course_reclaim::table
            .select(CourseReclaim::as_select())
            .load(conn)
    }

    /// Writes the policy (a row with neither limit is removed).
    pub fn set(conn: &mut PgConnection, policy: &CourseReclaim) -> QueryResult<()> {
        if policy.idle_gpu_minutes.is_none() && policy.max_runtime_minutes.is_none() {
            diesel::delete(course_reclaim::table.find(policy.course_id)).execute(conn)?;
            return Ok(());
        }
        diesel::insert_into(course_reclaim::table)
            .values(policy)
            .on_conflict(course_reclaim::course_id)
            .do_update()
            .set((
                course_reclaim::idle_gpu_minutes.eq(policy.idle_gpu_minutes),
                course_reclaim::idle_action.eq(policy.idle_action),
                course_reclaim::max_runtime_minutes.eq(policy.max_runtime_minutes),
            ))
            .execute(conn)
            .map(|_| ())
    }
}
