//! What controllers sharing one database coordinate through besides rows: the database's clock
//! (the one clock every lease, heartbeat and idle comparison is made against, so controllers
//! whose clocks differ agree) and the per-node advisory lock certificate renewal holds.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Bool, Text, Timestamptz};

/// First half of the renewal lock's key ("cohort-r" as an integer's top bytes); the second
/// half is the node name's hash.
const RENEWAL_LOCK_CLASS: i32 = 0x636f_6872;

/// The database's now (the start of the current transaction, when in one).
pub fn clock(conn: &mut PgConnection) -> QueryResult<DateTime<Utc>> {
    diesel::select(diesel::dsl::sql::<Timestamptz>("now()")).get_result(conn)
}

/// Takes node `node`'s renewal lock for this session; `false` when another session holds it.
/// The caller must [`unlock_renewal`] on the same connection before it goes back to the pool.
pub fn try_lock_renewal(conn: &mut PgConnection, node: &str) -> QueryResult<bool> {
    diesel::select(
        diesel::dsl::sql::<Bool>(&format!(
            "pg_try_advisory_lock({RENEWAL_LOCK_CLASS}, hashtext("
        ))
        .bind::<Text, _>(node)
        .sql("))"),
    )
    .get_result(conn)
}

/// Lets go of node `node`'s renewal lock taken on this connection.
pub fn unlock_renewal(conn: &mut PgConnection, node: &str) -> QueryResult<bool> {
    diesel::select(
        diesel::dsl::sql::<Bool>(&format!(
            "pg_advisory_unlock({RENEWAL_LOCK_CLASS}, hashtext("
        ))
        .bind::<Text, _>(node)
        .sql("))"),
    )
    .get_result(conn)
}
