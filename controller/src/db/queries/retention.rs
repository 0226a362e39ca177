//! The pruner's deletes: audit rows and finished operations (their items go with them, `ON
//! DELETE CASCADE`) past their retention, a batch at a time so no statement holds many locks or
//! a long transaction; ages by the database's clock. `instance_usage` needs none: one row per
//! instance, deleted with it.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer};

/// Key of the advisory lock a pruning batch holds ("cohortpr" as an integer): one controller
/// prunes at a time.
const LOCK_KEY: i64 = 0x636f_686f_7274_7072;

/// Takes the pruner's advisory lock for the transaction; `false` when another controller holds
/// it.
pub fn try_lock(conn: &mut PgConnection) -> QueryResult<bool> {
    diesel::select(diesel::dsl::sql::<diesel::sql_types::Bool>(&format!(
        "pg_try_advisory_xact_lock({LOCK_KEY})"
    )))
    .get_result(conn)
}

/// Deletes at most `batch` audit rows older than `days` days; how many.
pub fn prune_audit(conn: &mut PgConnection, days: u32, batch: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM audit_log WHERE id IN (\
             SELECT id FROM audit_log \
             WHERE created_at < now() - make_interval(days => $1) \
             ORDER BY id LIMIT $2)",
    )
    .bind::<Integer, _>(days.min(i32::MAX as u32) as i32)
    .bind::<BigInt, _>(batch)
    .execute(conn)
}

/// Deletes at most `batch` operations that finished (success, failure, cancelled) more than
/// `days` days ago, with their items; how many operations.
pub fn prune_operations(conn: &mut PgConnection, days: u32, batch: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM operations WHERE id IN (\
             SELECT id FROM operations \
             WHERE finished_at < now() - make_interval(days => $1) \
               AND status IN ('success', 'failure', 'cancelled') \
             ORDER BY finished_at LIMIT $2)",
    )
    .bind::<Integer, _>(days.min(i32::MAX as u32) as i32)
    .bind::<BigInt, _>(batch)
    .execute(conn)
}
