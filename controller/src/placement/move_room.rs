//! The database side of moving an instance to another node: whether a node has room for it
//! (as placement judges, with the same SQL functions: online, cpu, memory, disk for the root and
//! the home, a free SSH port, GPUs of its model with room), which node an evacuation sends it
//! to, and the one transaction that makes it the other node's: its node, a port allocated there
//! (its old one freed by the same update), and its GPU slots given back on the old node and
//! taken on the new one. The unique index on (node, port) is the last guard, as for placement.

use cohort_proto::api::instances::{GpuShare, ObservedState};
use cohort_proto::api::nodes::NodeState;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Integer, Nullable, Text};

use crate::app::config::PlacementConfig;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::schema::{gpu_allocations, instances, nodes};
use crate::error::{ActionError, ActionResult};
use crate::placement::gpu_slots;

/// A node as a move sees it: whether the instance fits there (cores, memory, disk with its
/// home, an SSH port) and whether GPUs of its model have room.
#[derive(QueryableByName)]
struct Room {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Bool)]
    fits: bool,
    #[diesel(sql_type = Bool)]
    gpus: bool,
}

#[derive(QueryableByName)]
struct Port {
    #[diesel(sql_type = Integer)]
    port: i32,
}

/// Why node `to` cannot take `instance` now; `None` when it can.
pub fn shortage(
    conn: &mut PgConnection,
    instance: &Instance,
    to: &Node,
    config: &PlacementConfig,
) -> QueryResult<Option<String>> {
    let Some(fit) = room(conn, instance, config, Some(to.id))? else {
        return Ok(Some(format!("node {} is gone", to.name)));
    };
    Ok(if to.state != NodeState::Online {
        Some(format!("node {} is {}", to.name, to.state))
    } else if !fit.fits {
        Some(format!(
            "node {} has not enough room for it ({} cores, {} MiB memory, {} GiB disk with its home, an SSH port)",
            to.name,
            instance.cpu,
            instance.memory_mib,
            instance.disk_gib + i64::from(instance.home_gib)
        ))
    } else if !fit.gpus {
        Some(format!(
            "node {} has no room on {} GPU(s) of the model it holds",
            to.name, instance.gpu_count
        ))
    } else {
        None
    })
}

/// The node an evacuation sends `instance` to: the least loaded online node other than its own
/// that has room for it (placement's spread), `None` when none has.
pub fn choose(
    conn: &mut PgConnection,
    instance: &Instance,
    config: &PlacementConfig,
) -> QueryResult<Option<Node>> {
    let found = room(conn, instance, config, None)?;
    found.map(|f| Node::find(conn, f.id)).transpose()
}

/// Node `only` as a move sees it; without `only`, the least loaded other node than the
/// instance's own where it fits (placement's spread), `None` when none does.
fn room(
    conn: &mut PgConnection,
    instance: &Instance,
    config: &PlacementConfig,
    only: Option<i64>,
) -> QueryResult<Option<Room>> {
    diesel::sql_query(
        "SELECT id, fits, gpus FROM (
           SELECT n.id, cohort_node_load(n.memory_used_mib, n.memory_bytes) AS load,
                  cohort_node_fits(n, NULL, $2, $3, $4, $5, $6, $7, $8, '{}'::int8[]) AS fits,
                  ($2 = 0 OR cohort_node_free_gpus(n.id, $9, $10, $11) >= $2) AS gpus
           FROM nodes n
           WHERE CASE WHEN $12::int8 IS NULL THEN n.id IS DISTINCT FROM $1 ELSE n.id = $12 END
         ) r
         WHERE $12::int8 IS NOT NULL OR (fits AND gpus)
         ORDER BY load, id
         LIMIT 1",
    )
    .bind::<Nullable<BigInt>, _>(instance.node_id)
    .bind::<Integer, _>(instance.gpu_count)
    .bind::<Integer, _>(instance.cpu)
    .bind::<Double, _>(config.cpu_overcommit)
    .bind::<BigInt, _>(instance.memory_mib)
    .bind::<Double, _>(config.memory_overcommit)
    .bind::<BigInt, _>(instance.disk_gib + i64::from(instance.home_gib))
    .bind::<Double, _>(config.disk_overcommit)
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .bind::<Bool, _>(instance.gpu_share == GpuShare::Exclusive)
    .bind::<Nullable<Integer>, _>(instance.gpu_share_count)
    .bind::<Nullable<BigInt>, _>(only)
    .get_result(conn)
    .optional()
}

/// A port of `to`'s range that no instance there holds and no container Cohort has no record
/// of serves (the moving instance's own copy, recorded as such meanwhile, aside): `wanted`
/// when it is such a port, else the lowest.
fn free_port(
    conn: &mut PgConnection,
    to: &Node,
    name: &str,
    wanted: Option<i32>,
) -> QueryResult<Option<i32>> {
    let port: Option<Port> = diesel::sql_query(
        "SELECT p AS port FROM generate_series($2::int4, $3::int4) p
         WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.node_id = $1 AND i.ssh_port = p)
           AND NOT EXISTS (SELECT 1 FROM orphans o
                           WHERE o.node_id = $1 AND o.ssh_port = p AND o.name <> $4)
         ORDER BY p IS DISTINCT FROM $5, p LIMIT 1",
    )
    .bind::<BigInt, _>(to.id)
    .bind::<Integer, _>(to.ssh_port_first)
    .bind::<Integer, _>(to.ssh_port_last)
    .bind::<Text, _>(name)
    .bind::<Nullable<Integer>, _>(wanted)
    .get_result(conn)
    .optional()?;
    Ok(port.map(|p| p.port))
}

/// What [`commit`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Committed {
    /// The instance is `to`'s now, reached on `port`.
    Moved { port: i32 },
    /// It was `to`'s already (an earlier try got this far).
    Already,
}

/// Makes instance `id`, found on node `from`, node `to`'s, in one transaction: a port there
/// (its old one when it is free: a move back keeps the endpoint it had), its GPU slots released
/// on `from` and taken on `to` (all or none). `NoCapacity` (nothing changed) when `to` has no
/// room for it (checked only with `check_room`) or no port or GPU; `Conflict` when the instance
/// is on neither node.
pub fn commit(
    conn: &mut PgConnection,
    id: i64,
    from: i64,
    to: &Node,
    config: &PlacementConfig,
    check_room: bool,
) -> ActionResult<Committed> {
    conn.transaction(|conn| {
        let instance: Instance = instances::table
            .find(id)
            .for_update()
            .select(Instance::as_select())
            .first(conn)?;
        if instance.node_id == Some(to.id) {
            return Ok(Committed::Already);
        }
        if instance.node_id != Some(from) {
            return Err(ActionError::conflict(
                None,
                format!("instance {} left its node during the move", instance.name),
            ));
        }
        // The row placement locks, so no placement hands out the same room meanwhile.
        let to: Node = nodes::table
            .find(to.id)
            .for_update()
            .select(Node::as_select())
            .first(conn)?;
        if check_room {
            if let Some(why) = shortage(conn, &instance, &to, config)? {
                return Err(ActionError::NoCapacity(why));
            }
        }
        let port = free_port(conn, &to, &instance.name, instance.ssh_port)?.ok_or_else(|| {
            ActionError::NoCapacity(format!("node {} has no free SSH port", to.name))
        })?;
        diesel::delete(gpu_allocations::table.filter(gpu_allocations::instance_id.eq(id)))
            .execute(conn)?;
        diesel::update(instances::table.find(id))
            .set((
                instances::node_id.eq(to.id),
                instances::ssh_port.eq(port),
                instances::observed_state.eq(ObservedState::Stopped),
            ))
            .execute(conn)?;
        if instance.gpu_count > 0 {
            let moved = Instance::find(conn, id)?;
            if let gpu_slots::Taken::Short(why) = gpu_slots::take_again(conn, &moved)? {
                return Err(ActionError::NoCapacity(why));
            }
        }
        Ok(Committed::Moved { port })
    })
}
