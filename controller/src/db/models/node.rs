//! `nodes`: GPU hosts running an agent, their capacity and state.

use chrono::{DateTime, Utc};
use cohort_proto::api::nodes::NodeState;
use diesel::prelude::*;

use crate::db::schema::nodes;

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = nodes, check_for_backend(diesel::pg::Pg))]
pub struct Node {
    pub id: i64,
    pub name: String,
    pub agent_url: String,
    pub ssh_host: String,
    pub ssh_port_first: i32,
    pub ssh_port_last: i32,
    pub state: NodeState,
    pub cores: i32,
    pub memory_bytes: i64,
    pub disk_total_bytes: i64,
    pub disk_free_bytes: i64,
    pub lxd_version: Option<String>,
    pub storage_driver: Option<String>,
    pub nvidia_runtime: bool,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
    pub enrolled_at: DateTime<Utc>,
    /// `lxd` or `incus`, from the node's inventory.
    pub daemon: Option<String>,
}

#[derive(Debug, Insertable)]
#[diesel(table_name = nodes)]
pub struct NewNode<'a> {
    pub name: &'a str,
    pub agent_url: &'a str,
    pub ssh_host: &'a str,
    pub ssh_port_first: i32,
    pub ssh_port_last: i32,
}

/// What one successful poll learned about a node's capacity.
#[derive(Debug, AsChangeset)]
#[diesel(table_name = nodes)]
pub struct NodeFacts<'a> {
    pub cores: i32,
    pub memory_bytes: i64,
    pub disk_total_bytes: i64,
    pub disk_free_bytes: i64,
    /// The LXD storage pool's used and total bytes (placement keeps a tenth of it free).
    pub pool_used_bytes: i64,
    pub pool_total_bytes: i64,
    pub daemon: Option<&'a str>,
    pub lxd_version: Option<&'a str>,
    pub storage_driver: Option<&'a str>,
    pub nvidia_runtime: bool,
    pub last_heartbeat_at: DateTime<Utc>,
}

impl Node {
    /// Creates the node, or re-points an existing one of that name (re-enrollment).
    pub fn upsert(conn: &mut PgConnection, new: &NewNode<'_>) -> QueryResult<Node> {
        diesel::insert_into(nodes::table)
            .values(new)
            .on_conflict(nodes::name)
            .do_update()
            .set((
                nodes::agent_url.eq(new.agent_url),
                nodes::ssh_host.eq(new.ssh_host),
                nodes::ssh_port_first.eq(new.ssh_port_first),
                nodes::ssh_port_last.eq(new.ssh_port_last),
            ))
            .returning(Node::as_returning())
            .get_result(conn)
    }

    pub fn by_name(conn: &mut PgConnection, name: &str) -> QueryResult<Option<Node>> {
        nodes::table
            .filter(nodes::name.eq(name))
            .select(Node::as_select())
            .first(conn)
            .optional()
    }

    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Node> {
        nodes::table.find(id).select(Node::as_select()).first(conn)
    }

    pub fn list(conn: &mut PgConnection) -> QueryResult<Vec<Node>> {
        nodes::table
            .order(nodes::name)
            .select(Node::as_select())
            .load(conn)
    }

    /// An admin's change (cordon, evacuate, restore). On an offline node it is also the state
    /// the node returns to when it answers again.
    pub fn set_state(conn: &mut PgConnection, id: i64, state: NodeState) -> QueryResult<usize> {
        if state != NodeState::Offline {
            let offline = nodes::table
                .find(id)
                .filter(nodes::state.eq(NodeState::Offline));
            let kept = diesel::update(offline)
                .set(nodes::state_before_offline.eq(state))
                .execute(conn)?;
            if kept > 0 {
                return Ok(kept);
            }
        }
        diesel::update(nodes::table.find(id))
            .set((
                nodes::state.eq(state),
                nodes::state_before_offline.eq(None::<String>),
            ))
            .execute(conn)
    }

    /// Records a successful poll; an `offline` node comes back to the state it had before
    /// (`online`, or `cordoned`/`evacuating`: a cordon is sticky).
    /// The heartbeat is the database's now, whatever `facts` says: the offline check compares it
    /// on the database's clock too, so a controller whose clock is off never makes a node look
    /// silent (or alive) to another.
    pub fn record_poll(conn: &mut PgConnection, id: i64, facts: &NodeFacts<'_>) -> QueryResult<()> {
        diesel::update(nodes::table.find(id))
            .set(facts)
            .execute(conn)?;
        diesel::update(nodes::table.find(id))
            .set(nodes::last_heartbeat_at.eq(diesel::dsl::sql::<
                diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>,
            >("now()")))
            .execute(conn)?;
        diesel::update(
            nodes::table
                .find(id)
                .filter(nodes::state.eq(NodeState::Offline)),
        )
        .set((
            nodes::state.eq(diesel::dsl::sql::<diesel::sql_types::Text>(
                "coalesce(state_before_offline, 'online')",
            )),
            nodes::state_before_offline.eq(None::<String>),
        ))
        .execute(conn)
        .map(|_| ())
    }

    /// Marks `offline` every node not heard from since `cutoff`, keeping the state each had to
    /// The nodes [`Node::mark_silent_offline`] would take offline, read without a lock (the
    /// offline check marks their instances first: instances before nodes, see `crate::db`).
    pub fn silent(conn: &mut PgConnection, cutoff: DateTime<Utc>) -> QueryResult<Vec<i64>> {
        let cutoff = on_db_clock(cutoff);
        nodes::table
            .filter(nodes::state.ne(NodeState::Offline))
            .filter(
                nodes::last_heartbeat_at
                    .lt(cutoff.clone().nullable())
                    .or(nodes::last_heartbeat_at
                        .is_null()
                        .and(nodes::enrolled_at.lt(cutoff))),
            )
            .order(nodes::id)
            .select(nodes::id)
            .load(conn)
    }

    /// Marks `offline` every node not heard from since `cutoff`, keeping the state each had to
    /// return to; returns their ids. Only how long ago `cutoff` is on this host's clock counts:
    /// the comparison is made on the database's clock, the one heartbeats are written with.
    pub fn mark_silent_offline(
        conn: &mut PgConnection,
        cutoff: DateTime<Utc>,
    ) -> QueryResult<Vec<i64>> {
        let cutoff = on_db_clock(cutoff);
        diesel::update(
            nodes::table
                .filter(nodes::state.ne(NodeState::Offline))
                .filter(
                    nodes::last_heartbeat_at.lt(cutoff.clone().nullable()).or(
                        nodes::last_heartbeat_at
                            .is_null()
                            .and(nodes::enrolled_at.lt(cutoff)),
                    ),
                ),
        )
        .set((
            nodes::state_before_offline.eq(nodes::state.nullable()),
            nodes::state.eq(NodeState::Offline),
        ))
        .returning(nodes::id)
        .get_results(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(nodes::table.find(id)).execute(conn)
    }

    /// Locks the row until the transaction ends (the row placement locks).
    pub fn lock(conn: &mut PgConnection, id: i64) -> QueryResult<Node> {
        nodes::table
            .find(id)
            .for_update()
            .select(Node::as_select())
            .first(conn)
    }

    /// The node's name, state, cores and memory with what its instances use of them, the row
    /// locked until the transaction ends.
    pub fn lock_load(
        conn: &mut PgConnection,
        id: i64,
    ) -> QueryResult<(String, NodeState, i32, i64, i64, i64)> {
        nodes::table
            .find(id)
            .select((
                nodes::name,
                nodes::state,
                nodes::cores,
                nodes::cpu_used,
                nodes::memory_bytes,
                nodes::memory_used_mib,
            ))
            .for_update()
            .first(conn)
    }

    /// Every node's id and name.
    pub fn names(conn: &mut PgConnection) -> QueryResult<Vec<(i64, String)>> {
        nodes::table.select((nodes::id, nodes::name)).load(conn)
    }
}

/// `cutoff` (a time on this host's clock) as the same distance into the past on the database's
/// clock, the one heartbeats are written with.
fn on_db_clock(
    cutoff: DateTime<Utc>,
) -> diesel::expression::SqlLiteral<diesel::sql_types::Timestamptz> {
    let ago = (Utc::now() - cutoff).num_milliseconds().max(0);
    diesel::dsl::sql::<diesel::sql_types::Timestamptz>(&format!(
        "(now() - interval '{ago} milliseconds')"
    ))
}
