//! `reclaim_warnings`: a reclaim announced to a container's student and not yet done, one per
//! container and reason. The row is the memory that makes the warning told once and the reclaim
//! wait for `due_at` across controller restarts; Keep working moves `due_at` once (`kept_at`).

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::{instances, reclaim_warnings};

/// Why a reclaim is announced: idleness (a stop or a GPU detach), the longest run, a GPU lease's
/// end (on-demand courses) or a GPU budget running out.
pub const IDLE: &str = "idle";
pub const MAX_RUNTIME: &str = "max_runtime";
pub const LEASE_END: &str = "lease_end";
pub const BUDGET: &str = "budget";

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = reclaim_warnings, check_for_backend(diesel::pg::Pg))]
pub struct ReclaimWarning {
    pub instance_id: i64,
    pub reason: String,
    /// `stop` or `detach`.
    pub action: String,
    pub warned_at: DateTime<Utc>,
    pub due_at: DateTime<Utc>,
    pub kept_at: Option<DateTime<Utc>>,
}

impl ReclaimWarning {
    pub fn of(
        conn: &mut PgConnection,
        instance_id: i64,
        reason: &str,
    ) -> QueryResult<Option<Self>> {
        reclaim_warnings::table
            .find((instance_id, reason))
            .select(Self::as_select())
            .first(conn)
            .optional()
    }

    /// The warnings pending on one container, the soonest due first.
    pub fn pending(conn: &mut PgConnection, instance_id: i64) -> QueryResult<Vec<Self>> {
        reclaim_warnings::table
            .filter(reclaim_warnings::instance_id.eq(instance_id))
            .order(reclaim_warnings::due_at)
            .select(Self::as_select())
            .load(conn)
    }

    pub fn insert(
        conn: &mut PgConnection,
        instance_id: i64,
        reason: &str,
        action: &str,
        warned_at: DateTime<Utc>,
        due_at: DateTime<Utc>,
    ) -> QueryResult<()> {
        diesel::insert_into(reclaim_warnings::table)
            .values((
                reclaim_warnings::instance_id.eq(instance_id),
                reclaim_warnings::reason.eq(reason),
                reclaim_warnings::action.eq(action),
                reclaim_warnings::warned_at.eq(warned_at),
                reclaim_warnings::due_at.eq(due_at),
            ))
            .on_conflict_do_nothing()
            .execute(conn)
            .map(drop)
    }

    /// Keep working: the reclaim moves to `due_at`, once (a warning already kept is left as is);
    /// returns whether it moved.
    pub fn keep(
        conn: &mut PgConnection,
        instance_id: i64,
        reason: &str,
        due_at: DateTime<Utc>,
        kept_at: DateTime<Utc>,
    ) -> QueryResult<bool> {
        diesel::update(
            reclaim_warnings::table
                .find((instance_id, reason))
                .filter(reclaim_warnings::kept_at.is_null()),
        )
        .set((
            reclaim_warnings::due_at.eq(due_at),
            reclaim_warnings::kept_at.eq(kept_at),
        ))
        .execute(conn)
        .map(|n| n > 0)
    }

    pub fn clear(conn: &mut PgConnection, instance_id: i64, reason: &str) -> QueryResult<()> {
        diesel::delete(reclaim_warnings::table.find((instance_id, reason)))
            .execute(conn)
            .map(drop)
    }

    /// Forgets the warnings of containers no longer wanted running (stopped by their student,
    /// or by the reclaim the warning announced): a new run starts a new count.
    pub fn clear_stale(conn: &mut PgConnection) -> QueryResult<usize> {
        let running = instances::table
            .filter(instances::desired_state.eq("running"))
            .select(instances::id);
        diesel::delete(reclaim_warnings::table.filter(diesel::dsl::not(
            reclaim_warnings::instance_id.eq_any(running),
        )))
        .execute(conn)
    }
}
