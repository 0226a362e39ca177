//! `course_reclaim`: a course's reclaim policy (GPU idleness, longest run); no row = never.

use diesel::prelude::*;

use crate::db::enums::IdleAction;
use crate::db::schema::course_reclaim;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_reclaim, check_for_backend(diesel::pg::Pg))]
pub struct CourseReclaim {
    pub course_id: i64,
    pub idle_gpu_minutes: Option<i32>,
    pub idle_action: IdleAction,
    pub max_runtime_minutes: Option<i32>,
    /// Reclaimer minutes between the warning and the stop or detach it announces (0: none).
    pub warn_minutes: i32,
}

/// Minutes of warning before a reclaim when the course says nothing.
pub const DEFAULT_WARN_MINUTES: i32 = 10;

/// The most minutes of warning (a day).
pub const MAX_WARN_MINUTES: i32 = 1440;

impl Default for CourseReclaim {
    fn default() -> Self {
        CourseReclaim {
            course_id: 0,
            idle_gpu_minutes: None,
            idle_action: IdleAction::default(),
            max_runtime_minutes: None,
            warn_minutes: DEFAULT_WARN_MINUTES,
        }
    }
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

    /// Writes the policy (a row with neither limit and the default warning is removed).
    pub fn set(conn: &mut PgConnection, policy: &CourseReclaim) -> QueryResult<()> {
        if policy.idle_gpu_minutes.is_none()
            && policy.max_runtime_minutes.is_none()
            && policy.warn_minutes == DEFAULT_WARN_MINUTES
        {
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
                course_reclaim::warn_minutes.eq(policy.warn_minutes),
            ))
            .execute(conn)
            .map(|_| ())
    }
}
