//! The reclaimer's reads and marks: its advisory lock, the courses whose end has passed, the
//! running instances of a course with their usage times, and whether an instance holds GPUs
//! (`crate::reclaim` decides what to stop, detach or delete).

use chrono::{DateTime, Utc};
use cohort_proto::api::courses::CourseState;
use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::prelude::*;

use crate::db::models::instance::Instance;
use crate::db::schema::{courses, gpu_allocations, instance_usage, instances};

/// Key of the advisory lock a pass holds ("cohort-reclaim" as an integer).
const LOCK_KEY: i64 = 0x636f_686f_7274_7263;

/// When a run began / when the GPU was last used.
type Since = Option<DateTime<Utc>>;

/// A running instance: when its run began, its GPU was last used, its GPUs were detached and
/// its notebook was last used.
pub type Running = (Instance, Since, Since, Since, Since);

/// Takes the pass's advisory lock for the transaction; `false` when another controller holds it.
pub fn try_lock(conn: &mut PgConnection) -> QueryResult<bool> {
    diesel::select(diesel::dsl::sql::<diesel::sql_types::Bool>(&format!(
        "pg_try_advisory_xact_lock({LOCK_KEY})"
    )))
    .get_result(conn)
}

/// The courses not torn down whose end is at or before `now`: id, code, end.
pub fn ended_courses(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
) -> QueryResult<Vec<(i64, String, DateTime<Utc>)>> {
    courses::table
        .filter(courses::ends_at.le(now))
        .filter(courses::state.ne(CourseState::TornDown))
        .select((
            courses::id,
            courses::code,
            courses::ends_at.assume_not_null(),
        ))
        .load(conn)
}

/// Marks course `id` ended when it is active; returns how many rows changed.
pub fn mark_ended(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
    diesel::update(courses::table.find(id))
        .filter(courses::state.eq(CourseState::Active))
        .set(courses::state.eq(CourseState::Ended))
        .execute(conn)
}

/// The code of course `id`.
pub fn course_code(conn: &mut PgConnection, id: i64) -> QueryResult<String> {
    courses::table.find(id).select(courses::code).first(conn)
}

/// The running instances of course `course_id` (wanted and seen running), each with when its
/// run began, when its GPU was last used (or put back on it), when its GPUs were detached and when its notebook
/// was last used.
pub fn running_of_course(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<Running>> {
    instances::table
        .inner_join(instance_usage::table)
        .filter(instances::course_id.eq(course_id))
        .filter(instances::desired_state.eq(DesiredState::Running))
        .filter(instances::observed_state.eq(ObservedState::Running))
        .select((
            Instance::as_select(),
            instance_usage::running_since,
            // GPUs put back on it restart the idle window as use does.
            diesel::dsl::sql::<diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>>(
                "GREATEST(instance_usage.gpu_active_at, instance_usage.gpus_attached_at)",
            ),
            instance_usage::gpus_detached_at,
            instance_usage::notebook_active_at,
        ))
        .load(conn)
}

/// Whether instance `id` holds GPU slots.
pub fn holds_gpus(conn: &mut PgConnection, id: i64) -> QueryResult<bool> {
    diesel::select(diesel::dsl::exists(
        gpu_allocations::table.filter(gpu_allocations::instance_id.eq(id)),
    ))
    .get_result::<bool>(conn)
}

/// A course's instances not already being deleted.
pub fn live_of_course(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<Instance>> {
    instances::table
        .filter(instances::course_id.eq(course_id))
        .filter(instances::desired_state.ne(DesiredState::Deleted))
        .filter(instances::node_id.is_not_null())
        .select(Instance::as_select())
        .load(conn)
}
