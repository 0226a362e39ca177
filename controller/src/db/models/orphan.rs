//! `orphans`: containers in a node's LXD project without a row in `instances`, as the poller
//! last saw them; their SSH ports stay out of placement while they are here.

use chrono::{DateTime, Utc};
use cohort_proto::api::instances::ObservedState;
use diesel::prelude::*;

use crate::db::schema::orphans;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = orphans, check_for_backend(diesel::pg::Pg))]
pub struct Orphan {
    pub node_id: i64,
    pub name: String,
    pub status: ObservedState,
    pub ssh_port: Option<i32>,
    pub reported: bool,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

impl Orphan {
    /// Records one poll's sightings on a node: new ones are inserted unreported, known ones
    /// refreshed, and those no longer there removed. Returns the ones seen on an earlier poll
    /// too that are not yet reported (a container deleted between the poll's two reads shows
    /// once and is gone by the next poll), now marked reported.
    pub fn record_seen(
        conn: &mut PgConnection,
        node_id: i64,
        seen: &[(String, ObservedState, Option<i32>)],
    ) -> QueryResult<Vec<Orphan>> {
        let names: Vec<&str> = seen.iter().map(|(n, _, _)| n.as_str()).collect();
        diesel::delete(
            orphans::table
                .filter(orphans::node_id.eq(node_id))
                .filter(orphans::name.ne_all(&names)),
        )
        .execute(conn)?;
        let now = Utc::now();
        for (name, status, port) in seen {
            diesel::insert_into(orphans::table)
                .values((
                    orphans::node_id.eq(node_id),
                    orphans::name.eq(name),
                    orphans::status.eq(status),
                    orphans::ssh_port.eq(port),
                ))
                .on_conflict((orphans::node_id, orphans::name))
                .do_update()
                .set((
                    orphans::status.eq(status),
                    orphans::ssh_port.eq(port),
                    orphans::last_seen_at.eq(now),
                ))
                .execute(conn)?;
        }
        diesel::update(
            orphans::table
                .filter(orphans::node_id.eq(node_id))
                .filter(orphans::reported.eq(false))
                // Inserted by an earlier poll: this transaction's rows carry its own `now()`.
                .filter(orphans::first_seen_at.lt(diesel::dsl::now)),
        )
        .set(orphans::reported.eq(true))
        .returning(Orphan::as_returning())
        .get_results(conn)
    }

    pub fn list(conn: &mut PgConnection) -> QueryResult<Vec<Orphan>> {
        orphans::table
            .order((orphans::node_id, orphans::name))
            .select(Orphan::as_select())
            .load(conn)
    }

    /// The orphan, its row locked until the transaction ends.
    pub fn lock(conn: &mut PgConnection, node_id: i64, name: &str) -> QueryResult<Option<Orphan>> {
        orphans::table
            .find((node_id, name))
            .select(Orphan::as_select())
            .for_update()
            .first(conn)
            .optional()
    }

    pub fn delete(conn: &mut PgConnection, node_id: i64, name: &str) -> QueryResult<usize> {
        diesel::delete(orphans::table.find((node_id, name))).execute(conn)
    }
}
