//! `batch_jobs` and `course_job_limits`: each batch job with where it stands, and a course's
//! limits on a student's jobs (`crate::batch` decides; times are the database's clock).

use chrono::{DateTime, Utc};
use cohort_proto::api::batch_jobs::JobState;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Int4, Nullable, Text};

use std::collections::HashMap;

use crate::db::models::gpu_lease::GpuLease;
use crate::db::schema::{
    batch_jobs, course_job_limits, courses, gpu_leases, gpus, instances, nodes, users,
};

/// Jobs running at once per student in a course without a row.
pub const DEFAULT_MAX_RUNNING: i32 = 1;
/// Jobs waiting at once per student in a course without a row.
pub const DEFAULT_MAX_QUEUED: i32 = 5;

const OPEN: [JobState; 4] = [
    JobState::Queued,
    JobState::Starting,
    JobState::Running,
    JobState::Unknown,
];

#[derive(Debug, Clone, PartialEq, Queryable, Selectable)]
#[diesel(table_name = batch_jobs, check_for_backend(diesel::pg::Pg))]
pub struct BatchJob {
    pub id: i64,
    pub instance_id: i64,
    pub user_id: i64,
    pub course_id: Option<i64>,
    pub command: Vec<String>,
    pub workdir: Option<String>,
    pub environment: serde_json::Value,
    pub gpus: i32,
    pub hours: f64,
    pub priority: i32,
    pub state: JobState,
    pub lease_id: Option<i64>,
    pub node_id: Option<i64>,
    pub submitted_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub warned_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub stop_reason: Option<String>,
    pub stop_state: Option<String>,
    pub gpu_seconds: f64,
}

/// A job as submitted.
#[derive(Debug, Clone, Insertable)]
#[diesel(table_name = batch_jobs)]
pub struct NewJob {
    pub instance_id: i64,
    pub user_id: i64,
    pub course_id: Option<i64>,
    pub command: Vec<String>,
    pub workdir: Option<String>,
    pub environment: serde_json::Value,
    pub gpus: i32,
    pub hours: f64,
    pub state: JobState,
    pub node_id: Option<i64>,
}

impl BatchJob {
    pub fn insert(conn: &mut PgConnection, job: &NewJob) -> QueryResult<BatchJob> {
        diesel::insert_into(batch_jobs::table)
            .values(job)
            .returning(BatchJob::as_select())
            .get_result(conn)
    }

    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Option<BatchJob>> {
        batch_jobs::table
            .find(id)
            .select(BatchJob::as_select())
            .first(conn)
            .optional()
    }

    /// Every job not over yet, in queue order: highest priority, then the earliest.
    pub fn open(conn: &mut PgConnection) -> QueryResult<Vec<BatchJob>> {
        batch_jobs::table
            .filter(batch_jobs::state.eq_any(OPEN))
            .order((
                batch_jobs::priority.desc(),
                batch_jobs::submitted_at,
                batch_jobs::id,
            ))
            .select(BatchJob::as_select())
            .load(conn)
    }

    /// The newest `limit` jobs, newest first.
    pub fn recent(conn: &mut PgConnection, limit: i64) -> QueryResult<Vec<BatchJob>> {
        batch_jobs::table
            .order(batch_jobs::id.desc())
            .limit(limit)
            .select(BatchJob::as_select())
            .load(conn)
    }

    /// The job holding lease `lease_id`, if one does.
    pub fn of_lease(conn: &mut PgConnection, lease_id: i64) -> QueryResult<Option<BatchJob>> {
        batch_jobs::table
            .filter(batch_jobs::lease_id.eq(lease_id))
            .select(BatchJob::as_select())
            .first(conn)
            .optional()
    }

    /// The priorities of the jobs holding these leases, by lease.
    pub fn priorities_of_leases(
        conn: &mut PgConnection,
        lease_ids: &[i64],
    ) -> QueryResult<std::collections::HashMap<i64, i32>> {
        let rows: Vec<(Option<i64>, i32)> = batch_jobs::table
            .filter(batch_jobs::lease_id.eq_any(lease_ids))
            .select((batch_jobs::lease_id, batch_jobs::priority))
            .load(conn)?;
        Ok(rows
            .into_iter()
            .filter_map(|(l, p)| Some((l?, p)))
            .collect())
    }

    /// How many of `user_id`'s jobs in `course_id` (none: outside a course) are running
    /// (starting, running or unknown) and how many wait.
    pub fn counts(
        conn: &mut PgConnection,
        user_id: i64,
        course_id: Option<i64>,
    ) -> QueryResult<(i64, i64)> {
        let states: Vec<JobState> = batch_jobs::table
            .filter(batch_jobs::user_id.eq(user_id))
            .filter(batch_jobs::course_id.is_not_distinct_from(course_id))
            .filter(batch_jobs::state.eq_any(OPEN))
            .select(batch_jobs::state)
            .load(conn)?;
        let waiting = states.iter().filter(|s| **s == JobState::Queued).count() as i64;
        Ok((states.len() as i64 - waiting, waiting))
    }

    pub fn set_lease(conn: &mut PgConnection, id: i64, lease_id: i64) -> QueryResult<usize> {
        diesel::update(batch_jobs::table.find(id))
            .set(batch_jobs::lease_id.eq(lease_id))
            .execute(conn)
    }

    /// Moves a queued job to `starting` on node `node_id`.
    pub fn starting(conn: &mut PgConnection, id: i64, node_id: i64) -> QueryResult<usize> {
        diesel::update(
            batch_jobs::table
                .find(id)
                .filter(batch_jobs::state.eq(JobState::Queued)),
        )
        .set((
            batch_jobs::state.eq(JobState::Starting),
            batch_jobs::node_id.eq(node_id),
        ))
        .execute(conn)
    }

    /// A started job runs from now until `ends_at`, or for its hours (each `hour_s` long).
    pub fn running(
        conn: &mut PgConnection,
        id: i64,
        ends_at: Option<DateTime<Utc>>,
        hour_s: u64,
    ) -> QueryResult<usize> {
        diesel::sql_query(
            "UPDATE batch_jobs SET state = 'running', started_at = now(),
                    ends_at = COALESCE($2, now() + make_interval(secs => hours * $3))
             WHERE id = $1 AND state = 'starting'",
        )
        .bind::<BigInt, _>(id)
        .bind::<Nullable<diesel::sql_types::Timestamptz>, _>(ends_at)
        .bind::<Double, _>(hour_s as f64)
        .execute(conn)
    }

    /// A node that does not answer about a started job: `unknown` until it does.
    pub fn unknown(conn: &mut PgConnection, id: i64, why: &str) -> QueryResult<usize> {
        diesel::update(
            batch_jobs::table
                .find(id)
                .filter(batch_jobs::state.eq_any([JobState::Running, JobState::Unknown])),
        )
        .set((
            batch_jobs::state.eq(JobState::Unknown),
            batch_jobs::reason.eq(why),
        ))
        .execute(conn)
    }

    /// Its node answers again: the job runs.
    pub fn reconciled(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::update(
            batch_jobs::table
                .find(id)
                .filter(batch_jobs::state.eq(JobState::Unknown)),
        )
        .set((
            batch_jobs::state.eq(JobState::Running),
            batch_jobs::reason.eq(None::<String>),
        ))
        .execute(conn)
    }

    /// Asks for the job to be stopped; its end records `state` and `reason`. The first ask
    /// stands.
    pub fn ask_stop(
        conn: &mut PgConnection,
        id: i64,
        state: JobState,
        reason: &str,
    ) -> QueryResult<usize> {
        diesel::update(
            batch_jobs::table
                .find(id)
                .filter(batch_jobs::stop_reason.is_null()),
        )
        .set((
            batch_jobs::stop_state.eq(state.as_str()),
            batch_jobs::stop_reason.eq(reason),
        ))
        .execute(conn)
    }

    pub fn warned(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::sql_query("UPDATE batch_jobs SET warned_at = now() WHERE id = $1")
            .bind::<BigInt, _>(id)
            .execute(conn)
    }

    /// Ends an open job: its state, exit code (if it has one) and why; a job that ran counts
    /// its GPUs times the seconds it ran.
    pub fn finish(
        conn: &mut PgConnection,
        id: i64,
        state: JobState,
        exit_code: Option<i32>,
        reason: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::sql_query(
            "UPDATE batch_jobs SET state = $2, exit_code = $3, reason = $4, ended_at = now(),
                    gpu_seconds = CASE WHEN started_at IS NULL THEN 0
                                  ELSE gpus * GREATEST(extract(epoch FROM now() - started_at), 0)
                                  END
             WHERE id = $1 AND state IN ('queued', 'starting', 'running', 'unknown')",
        )
        .bind::<BigInt, _>(id)
        .bind::<Text, _>(state.as_str())
        .bind::<Nullable<Int4>, _>(exit_code)
        .bind::<Nullable<Text>, _>(reason)
        .execute(conn)
    }

    pub fn set_priority(conn: &mut PgConnection, id: i64, priority: i32) -> QueryResult<usize> {
        diesel::update(batch_jobs::table.find(id))
            .set(batch_jobs::priority.eq(priority))
            .execute(conn)
    }
}

/// A course's limits on each student's jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_job_limits, check_for_backend(diesel::pg::Pg))]
pub struct CourseJobLimits {
    pub course_id: i64,
    pub max_running: i32,
    pub max_queued: i32,
}

impl CourseJobLimits {
    /// The course's limits, or the defaults (1 running, 5 waiting); outside a course, the
    /// defaults.
    pub fn of(conn: &mut PgConnection, course_id: Option<i64>) -> QueryResult<CourseJobLimits> {
        let row = match course_id {
            Some(id) => course_job_limits::table
                .find(id)
                .select(CourseJobLimits::as_select())
                .first(conn)
                .optional()?,
            None => None,
        };
        Ok(row.unwrap_or(CourseJobLimits {
            course_id: course_id.unwrap_or(0),
            max_running: DEFAULT_MAX_RUNNING,
            max_queued: DEFAULT_MAX_QUEUED,
        }))
    }

    pub fn set(conn: &mut PgConnection, row: &CourseJobLimits) -> QueryResult<()> {
        diesel::insert_into(course_job_limits::table)
            .values(row)
            .on_conflict(course_job_limits::course_id)
            .do_update()
            .set((
                course_job_limits::max_running.eq(row.max_running),
                course_job_limits::max_queued.eq(row.max_queued),
            ))
            .execute(conn)
            .map(drop)
    }
}

/// What a list of jobs names, read in one query per table for the whole list: container, student,
/// course and node names, and each job's lease with its GPU's UUID.
#[derive(Default)]
pub struct JobLabels {
    pub instances: HashMap<i64, String>,
    pub users: HashMap<i64, String>,
    pub courses: HashMap<i64, String>,
    pub nodes: HashMap<i64, String>,
    pub leases: HashMap<i64, GpuLease>,
    pub gpus: HashMap<i64, String>,
}

impl JobLabels {
    pub fn of(conn: &mut PgConnection, jobs: &[BatchJob]) -> QueryResult<JobLabels> {
        fn ids(it: impl Iterator<Item = i64>) -> Vec<i64> {
            let mut ids: Vec<i64> = it.collect();
            ids.sort_unstable();
            ids.dedup();
            ids
        }
        let leases: HashMap<i64, GpuLease> = gpu_leases::table
            .filter(gpu_leases::id.eq_any(ids(jobs.iter().filter_map(|j| j.lease_id))))
            .select(GpuLease::as_select())
            .load(conn)?
            .into_iter()
            .map(|l| (l.id, l))
            .collect();
        let gpu_ids = ids(leases.values().filter_map(|l| l.gpu_id));
        Ok(JobLabels {
            instances: instances::table
                .filter(instances::id.eq_any(ids(jobs.iter().map(|j| j.instance_id))))
                .select((instances::id, instances::name))
                .load(conn)?
                .into_iter()
                .collect(),
            users: users::table
                .filter(users::id.eq_any(ids(jobs.iter().map(|j| j.user_id))))
                .select((users::id, users::username))
                .load(conn)?
                .into_iter()
                .collect(),
            courses: courses::table
                .filter(courses::id.eq_any(ids(jobs.iter().filter_map(|j| j.course_id))))
                .select((courses::id, courses::code))
                .load(conn)?
                .into_iter()
                .collect(),
            nodes: nodes::table
                .filter(nodes::id.eq_any(ids(jobs.iter().filter_map(|j| j.node_id))))
                .select((nodes::id, nodes::name))
                .load(conn)?
                .into_iter()
                .collect(),
            gpus: gpus::table
                .filter(gpus::id.eq_any(gpu_ids))
                .select((gpus::id, gpus::uuid))
                .load(conn)?
                .into_iter()
                .collect(),
            leases,
        })
    }
}
