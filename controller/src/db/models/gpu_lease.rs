//! `course_gpu_modes` and `gpu_leases`: whether a course's containers get their GPUs pinned or
//! on demand, and each request for a GPU on demand with its lease (`crate::reclaim::leases`
//! decides; times are the database's clock).

use chrono::{DateTime, Utc};
use cohort_proto::api::gpu_leases::LeaseState;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Nullable, Text};

use crate::db::schema::{course_gpu_modes, gpu_leases};

/// A course's GPU mode; no row: pinned.
#[derive(Debug, Clone, PartialEq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_gpu_modes, check_for_backend(diesel::pg::Pg))]
pub struct CourseGpuMode {
    pub course_id: i64,
    /// `pinned` or `on-demand`.
    pub gpu_mode: String,
    pub gpu_lease_max_hours: f64,
}

/// The mode name of a course whose containers run without a GPU until one is leased.
pub const ON_DEMAND: &str = "on-demand";

impl CourseGpuMode {
    pub fn of(conn: &mut PgConnection, course_id: i64) -> QueryResult<Option<CourseGpuMode>> {
        course_gpu_modes::table
            .find(course_id)
            .select(CourseGpuMode::as_select())
            .first(conn)
            .optional()
    }

    /// The course's on-demand settings; `None` when it pins its GPUs.
    pub fn on_demand(
        conn: &mut PgConnection,
        course_id: i64,
    ) -> QueryResult<Option<CourseGpuMode>> {
        Ok(Self::of(conn, course_id)?.filter(|m| m.gpu_mode == ON_DEMAND))
    }

    pub fn set(conn: &mut PgConnection, row: &CourseGpuMode) -> QueryResult<()> {
        diesel::insert_into(course_gpu_modes::table)
            .values(row)
            .on_conflict(course_gpu_modes::course_id)
            .do_update()
            .set((
                course_gpu_modes::gpu_mode.eq(&row.gpu_mode),
                course_gpu_modes::gpu_lease_max_hours.eq(row.gpu_lease_max_hours),
            ))
            .execute(conn)
            .map(drop)
    }
}

#[derive(Debug, Clone, PartialEq, Queryable, Selectable)]
#[diesel(table_name = gpu_leases, check_for_backend(diesel::pg::Pg))]
pub struct GpuLease {
    pub id: i64,
    pub instance_id: i64,
    pub user_id: i64,
    pub course_id: i64,
    pub node_id: Option<i64>,
    pub gpu_id: Option<i64>,
    pub hours: f64,
    pub state: LeaseState,
    pub requested_at: DateTime<Utc>,
    pub granted_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    pub end_reason: Option<String>,
}

const OPEN: [LeaseState; 2] = [LeaseState::Queued, LeaseState::Active];

impl GpuLease {
    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Option<GpuLease>> {
        gpu_leases::table
            .find(id)
            .select(GpuLease::as_select())
            .first(conn)
            .optional()
    }

    /// The queued request or active lease of instance `id`.
    pub fn open_of(conn: &mut PgConnection, instance_id: i64) -> QueryResult<Option<GpuLease>> {
        gpu_leases::table
            .filter(gpu_leases::instance_id.eq(instance_id))
            .filter(gpu_leases::state.eq_any(OPEN))
            .select(GpuLease::as_select())
            .first(conn)
            .optional()
    }

    /// The latest request of instance `id`, open or not.
    pub fn latest_of(conn: &mut PgConnection, instance_id: i64) -> QueryResult<Option<GpuLease>> {
        gpu_leases::table
            .filter(gpu_leases::instance_id.eq(instance_id))
            .order(gpu_leases::id.desc())
            .select(GpuLease::as_select())
            .first(conn)
            .optional()
    }

    /// Every queued request or active lease, oldest first.
    pub fn open(conn: &mut PgConnection, state: LeaseState) -> QueryResult<Vec<GpuLease>> {
        gpu_leases::table
            .filter(gpu_leases::state.eq(state))
            .order((gpu_leases::requested_at, gpu_leases::id))
            .select(GpuLease::as_select())
            .load(conn)
    }

    /// Records a queued request.
    pub fn queue(
        conn: &mut PgConnection,
        instance_id: i64,
        user_id: i64,
        course_id: i64,
        node_id: Option<i64>,
        hours: f64,
    ) -> QueryResult<GpuLease> {
        diesel::insert_into(gpu_leases::table)
            .values((
                gpu_leases::instance_id.eq(instance_id),
                gpu_leases::user_id.eq(user_id),
                gpu_leases::course_id.eq(course_id),
                gpu_leases::node_id.eq(node_id),
                gpu_leases::hours.eq(hours),
                gpu_leases::state.eq(LeaseState::Queued),
            ))
            .returning(GpuLease::as_select())
            .get_result(conn)
    }

    /// Grants lease `id` GPU `gpu_id` on node `node_id` from now for its hours, each hour
    /// `hour_s` seconds long.
    pub fn activate(
        conn: &mut PgConnection,
        id: i64,
        node_id: i64,
        gpu_id: i64,
        hour_s: u64,
    ) -> QueryResult<()> {
        diesel::sql_query(
            "UPDATE gpu_leases SET state = 'active', node_id = $2, gpu_id = $3, granted_at = now(),
                    ends_at = now() + make_interval(secs => hours * $4)
             WHERE id = $1 AND state = 'queued'",
        )
        .bind::<BigInt, _>(id)
        .bind::<BigInt, _>(node_id)
        .bind::<BigInt, _>(gpu_id)
        .bind::<Double, _>(hour_s as f64)
        .execute(conn)
        .map(drop)
    }

    /// Ends lease `id` (`Ended`) or takes a request out of the queue (`Cancelled`), with why.
    pub fn close(
        conn: &mut PgConnection,
        id: i64,
        state: LeaseState,
        reason: &str,
    ) -> QueryResult<usize> {
        diesel::sql_query(
            "UPDATE gpu_leases SET state = $2, ended_at = now(), end_reason = $3
             WHERE id = $1 AND state IN ('queued', 'active')",
        )
        .bind::<BigInt, _>(id)
        .bind::<Text, _>(state.as_str())
        .bind::<Nullable<Text>, _>(Some(reason))
        .execute(conn)
    }

    /// Keep working on a warned lease end: active lease `id` now ends at `ends_at`.
    pub fn extend(conn: &mut PgConnection, id: i64, ends_at: DateTime<Utc>) -> QueryResult<usize> {
        diesel::update(
            gpu_leases::table
                .find(id)
                .filter(gpu_leases::state.eq(LeaseState::Active)),
        )
        .set(gpu_leases::ends_at.eq(ends_at))
        .execute(conn)
    }

    /// Active leases whose end has come.
    pub fn due(conn: &mut PgConnection) -> QueryResult<Vec<GpuLease>> {
        Self::ending_within(conn, 0)
    }

    /// Active leases ending within `seconds` from now (0: ended already), soonest first: the
    /// hook a lease-end warning reads.
    pub fn ending_within(conn: &mut PgConnection, seconds: i64) -> QueryResult<Vec<GpuLease>> {
        gpu_leases::table
            .filter(gpu_leases::state.eq(LeaseState::Active))
            .filter(
                diesel::dsl::sql::<diesel::sql_types::Bool>(
                    "ends_at <= now() + make_interval(secs => ",
                )
                .bind::<Double, _>(seconds.max(0) as f64)
                .sql(")"),
            )
            .order(gpu_leases::ends_at)
            .select(GpuLease::as_select())
            .load(conn)
    }
}

/// What the API shows of the rows a lease refers to.
#[derive(Debug, Clone, Default)]
pub struct LeaseNames {
    pub instance: String,
    pub username: String,
    pub course: String,
    pub node: Option<String>,
    pub gpu: Option<String>,
}

impl LeaseNames {
    pub fn of(conn: &mut PgConnection, lease: &GpuLease) -> QueryResult<LeaseNames> {
        use crate::db::schema::{courses, gpus, instances, nodes, users};
        let instance = instances::table
            .find(lease.instance_id)
            .select(instances::name)
            .first(conn)?;
        let username = users::table
            .find(lease.user_id)
            .select(users::username)
            .first(conn)?;
        let course = courses::table
            .find(lease.course_id)
            .select(courses::code)
            .first(conn)?;
        let node = match lease.node_id {
            Some(id) => nodes::table
                .find(id)
                .select(nodes::name)
                .first(conn)
                .optional()?,
            None => None,
        };
        let gpu = match lease.gpu_id {
            Some(id) => gpus::table
                .find(id)
                .select(gpus::uuid)
                .first(conn)
                .optional()?,
            None => None,
        };
        Ok(LeaseNames {
            instance,
            username,
            course,
            node,
            gpu,
        })
    }
}

/// The first GPU instance `id` holds a slot of (the one a lease names).
pub fn first_gpu_held(conn: &mut PgConnection, instance_id: i64) -> QueryResult<Option<i64>> {
    use crate::db::schema::gpu_allocations;
    gpu_allocations::table
        .filter(gpu_allocations::instance_id.eq(instance_id))
        .order(gpu_allocations::gpu_id)
        .select(gpu_allocations::gpu_id)
        .first(conn)
        .optional()
}
