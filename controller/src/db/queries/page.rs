//! The queries behind `GET /instances`: the page itself (each instance with what it refers to,
//! in one statement) and the snapshot checks that let a kept page be served again
//! (`crate::instances::page_cache`).

use diesel::prelude::*;
use diesel::sql_types::{Bool, Text};

use crate::db::literal_limit::LiteralLimitDsl;
use crate::db::models::instance::{self, InstanceRefs, ShownInstance};
use crate::db::schema::instances;

/// Whose instances a page shows.
#[derive(Debug, Clone, Copy)]
pub enum Visible {
    /// Everyone's (an admin).
    All,
    /// The account's own (a student).
    OwnedBy(i64),
    /// The account's own and those of the courses it teaches (an instructor).
    OwnedOrTaughtBy(i64),
}

/// Up to `limit + 1` instances of those `visible`, by name after `after`, each with what it
/// refers to.
pub fn instances(
    conn: &mut PgConnection,
    visible: Visible,
    after: Option<&str>,
    limit: u32,
) -> QueryResult<Vec<(ShownInstance, InstanceRefs)>> {
    let mut q = instance::with_refs()
        .select((ShownInstance::as_select(), InstanceRefs::as_select()))
        .into_boxed();
    match visible {
        Visible::All => {}
        Visible::OwnedBy(user) => q = q.filter(instances::owner_id.eq(user)),
        Visible::OwnedOrTaughtBy(user) => {
            q = q.filter(
                instances::owner_id
                    .eq(user)
                    .or(crate::db::models::course_staff::taught_by(user)),
            );
        }
    }
    if let Some(after) = after {
        q = q.filter(instances::name.gt(after));
    }
    q.order(instances::name).literal_limit(limit + 1).load(conn)
}

#[derive(QueryableByName)]
struct SnapshotRow {
    #[diesel(sql_type = Text)]
    snapshot: String,
}

#[derive(QueryableByName)]
struct Changed {
    #[diesel(sql_type = Bool)]
    changed: bool,
}

/// The snapshot of the current transaction (under `REPEATABLE READ`, the one every statement
/// of it sees), as `xmin:xmax:xip,...`.
pub fn current_snapshot(conn: &mut PgConnection) -> QueryResult<String> {
    diesel::sql_query("SELECT pg_current_snapshot()::text AS snapshot")
        .get_result::<SnapshotRow>(conn)
        .map(|r| r.snapshot)
}

/// Whether no transaction that changed what pages show has committed since `snapshot`: none
/// in `inventory_writes` that this statement sees (so committed) and `snapshot` did not.
/// Transactions older than the snapshot's `xmin` had ended before it, so only newer ids are
/// looked at (an index range).
pub fn unchanged_since(conn: &mut PgConnection, snapshot: &str) -> QueryResult<bool> {
    diesel::sql_query(
        "SELECT EXISTS (SELECT 1 FROM inventory_writes \
         WHERE xid >= pg_snapshot_xmin($1::pg_snapshot) \
         AND NOT pg_visible_in_snapshot(xid, $1::pg_snapshot)) AS changed",
    )
    .bind::<Text, _>(snapshot)
    .get_result::<Changed>(conn)
    .map(|r| !r.changed)
}

/// The oldest transaction id still running (or the next to be given, when none is), as text.
pub fn oldest_running(conn: &mut PgConnection) -> QueryResult<String> {
    diesel::sql_query("SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS snapshot")
        .get_result::<SnapshotRow>(conn)
        .map(|r| r.snapshot)
}

/// Removes the ids below `xmin` (an [`oldest_running`] value): transactions that had ended
/// when it was read. Returns how many went.
pub fn prune_below(conn: &mut PgConnection, xmin: &str) -> QueryResult<usize> {
    diesel::sql_query("DELETE FROM inventory_writes WHERE xid < $1::xid8")
        .bind::<Text, _>(xmin)
        .execute(conn)
}
