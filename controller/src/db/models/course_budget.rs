//! `course_budgets` and `student_budgets`: a course's GPU hours per student and period, and per
//! student and period the hours granted on top and when they were told of the 80 % mark
//! (`crate::reclaim::budget` decides; the used hours come from `gpu_usage_hours`).

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::{course_budgets, gpu_usage_hours, instance_usage, student_budgets};

#[derive(Debug, Clone, PartialEq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_budgets, check_for_backend(diesel::pg::Pg))]
pub struct CourseBudget {
    pub course_id: i64,
    pub gpu_hours_per_student: f64,
    /// `week`, `month` or `course`.
    pub budget_period: String,
}

/// One student's row in one period.
#[derive(Debug, Clone, Default, PartialEq, Queryable, Selectable)]
#[diesel(table_name = student_budgets, check_for_backend(diesel::pg::Pg))]
pub struct StudentBudget {
    pub granted_hours: f64,
    pub warned_at: Option<DateTime<Utc>>,
    pub warned_limit_hours: Option<f64>,
}

impl CourseBudget {
    pub fn of(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<CourseBudget>> {
        course_budgets::table
            .find(course_id)
            .select(CourseBudget::as_select())
            .first(conn)
            .optional()
    }

    pub fn all(conn: &mut PgConnection) -> QueryResult<Vec<CourseBudget>> {
        course_budgets::table
            .select(CourseBudget::as_select())
            .order(course_budgets::course_id)
            .load(conn)
    }

    /// Sets course `course_id`'s budget, or removes it (`None`).
    pub fn set(
        conn: &mut PgConnection,
        course_id: i64,
        budget: Option<&CourseBudget>,
    ) -> QueryResult<()> {
        let Some(b) = budget else {
            diesel::delete(course_budgets::table.find(course_id)).execute(conn)?;
            return Ok(());
        };
        diesel::insert_into(course_budgets::table)
            .values(b)
            .on_conflict(course_budgets::course_id)
            .do_update()
            .set((
                course_budgets::gpu_hours_per_student.eq(b.gpu_hours_per_student),
                course_budgets::budget_period.eq(&b.budget_period),
            ))
            .execute(conn)
            .map(drop)
    }
}

impl StudentBudget {
    /// The student's row for the period starting at `start` (zeros when none).
    pub fn of(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
        start: DateTime<Utc>,
    ) -> QueryResult<StudentBudget> {
        Ok(student_budgets::table
            .find((course_id, user_id, start))
            .select(StudentBudget::as_select())
            .first(conn)
            .optional()?
            .unwrap_or_default())
    }

    /// Adds `hours` to the student's grant in the period; returns the period's total granted.
    pub fn grant(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
        start: DateTime<Utc>,
        hours: f64,
    ) -> QueryResult<f64> {
        diesel::insert_into(student_budgets::table)
            .values((
                student_budgets::course_id.eq(course_id),
                student_budgets::user_id.eq(user_id),
                student_budgets::period_start.eq(start),
                student_budgets::granted_hours.eq(hours),
            ))
            .on_conflict((
                student_budgets::course_id,
                student_budgets::user_id,
                student_budgets::period_start,
            ))
            .do_update()
            .set(student_budgets::granted_hours.eq(student_budgets::granted_hours + hours))
            .returning(student_budgets::granted_hours)
            .get_result(conn)
    }

    /// Records that the student was told of the 80 % mark of `limit` hours, at the database's
    /// time.
    pub fn mark_warned(
        conn: &mut PgConnection,
        course_id: i64,
        user_id: i64,
        start: DateTime<Utc>,
        limit: f64,
    ) -> QueryResult<()> {
        type Stamp = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>;
        let now = || diesel::dsl::sql::<Stamp>("now()");
        diesel::insert_into(student_budgets::table)
            .values((
                student_budgets::course_id.eq(course_id),
                student_budgets::user_id.eq(user_id),
                student_budgets::period_start.eq(start),
                student_budgets::warned_at.eq(now()),
                student_budgets::warned_limit_hours.eq(limit),
            ))
            .on_conflict((
                student_budgets::course_id,
                student_budgets::user_id,
                student_budgets::period_start,
            ))
            .do_update()
            .set((
                student_budgets::warned_at.eq(now()),
                student_budgets::warned_limit_hours.eq(limit),
            ))
            .execute(conn)
            .map(drop)
    }
}

/// The start of the hour holding `since`: usage is kept by the hour.
fn hour_of(since: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    since
        .duration_trunc(chrono::Duration::hours(1))
        .unwrap_or(since)
}

/// The allocated GPU-seconds of `user_id`'s containers in course `course_id` from the hour
/// holding `since` on.
pub fn used_seconds(
    conn: &mut PgConnection,
    course_id: i64,
    user_id: i64,
    since: DateTime<Utc>,
) -> QueryResult<f64> {
    use diesel::dsl::sum;
    let hour = hour_of(since);
    let total: Option<f64> = gpu_usage_hours::table
        .filter(gpu_usage_hours::course_id.eq(course_id))
        .filter(gpu_usage_hours::owner_id.eq(user_id))
        .filter(gpu_usage_hours::hour.ge(hour))
        .select(sum(gpu_usage_hours::allocated_s))
        .first(conn)?;
    Ok(total.unwrap_or(0.0))
}

/// The allocated GPU-seconds of each student's containers in course `course_id` from the hour
/// holding `since` on, by owner (one query for a whole queue's fair share).
pub fn used_seconds_by_user(
    conn: &mut PgConnection,
    course_id: i64,
    since: DateTime<Utc>,
) -> QueryResult<std::collections::HashMap<i64, f64>> {
    use diesel::dsl::sum;
    let hour = hour_of(since);
    let rows: Vec<(i64, Option<f64>)> = gpu_usage_hours::table
        .filter(gpu_usage_hours::course_id.eq(course_id))
        .filter(gpu_usage_hours::hour.ge(hour))
        .group_by(gpu_usage_hours::owner_id)
        .select((gpu_usage_hours::owner_id, sum(gpu_usage_hours::allocated_s)))
        .load(conn)?;
    Ok(rows
        .into_iter()
        .map(|(user, s)| (user, s.unwrap_or(0.0)))
        .collect())
}

/// Whether the last poll saw processes of instance `id` on a GPU (a GPU it uses, attached by
/// Cohort or not, is accounted and so rationed).
pub fn uses_gpu(conn: &mut PgConnection, id: i64) -> QueryResult<bool> {
    Ok(instance_usage::table
        .find(id)
        .select(instance_usage::gpu_processes)
        .first::<i32>(conn)
        .optional()?
        .is_some_and(|n| n > 0))
}

/// The student's instances in course `course_id` whose GPUs a budget took.
pub fn budget_detached(
    conn: &mut PgConnection,
    course_id: i64,
    user_id: i64,
    reason_prefix: &str,
) -> QueryResult<Vec<i64>> {
    use crate::db::schema::instances;
    instances::table
        .inner_join(instance_usage::table)
        .filter(instances::course_id.eq(course_id))
        .filter(instances::owner_id.eq(user_id))
        .filter(instance_usage::detach_reason.like(format!("{reason_prefix}%")))
        .select(instances::id)
        .load(conn)
}
