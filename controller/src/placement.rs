//! Placement: filter the nodes that can hold an instance (online, not cordoned, cpu, memory,
//! disk, GPUs of the model asked for with room under `share_limit`, a free SSH port), score them
//! (spread or pack, holding the image first), then allocate the port and GPU slots on the best
//! one. Runs inside the caller's transaction, so the instance row, its port and its GPU slots
//! commit together; the unique indexes are the last guard.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Nullable, Text};

use crate::config::PlacementConfig;
use crate::models::instance::Instance;

/// Where an instance went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node_id: i64,
    pub node_name: String,
    pub ssh_port: i32,
    /// (gpu id, slot) pairs.
    pub gpu_slots: Vec<(i64, i32)>,
}

/// Nodes ranked by the cheap tests before the GPU test runs on them.
const SHORTLIST: i64 = 64;

/// Nodes one pass may find unable to take the instance once locked (the GPU test ran on a
/// snapshot) before the next pass.
const TRIES_PER_PASS: usize = 4;

/// How hard a pass looks for a node.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The best of the shortlist that no other transaction holds.
    Shortlist,
    /// The best of every node that no other transaction holds.
    Everything,
    /// The best of every node, waiting for its lock.
    Wait,
}

/// Tries to place `instance`; `None` when no node can hold it now. Only the node `pinned` names
/// is considered when it is set.
///
/// Each try is one query over `nodes` that filters on the usage counters the database keeps
/// (see the `placement_counters` migration), ranks the nodes and locks the best one no other
/// placement holds (`FOR UPDATE SKIP LOCKED`), so concurrent placements spread over nodes
/// instead of queueing on the single best one. Only when every node that fits is held does it
/// wait for one. The GPU slots and the port are then taken under that lock.
pub fn place(
    conn: &mut PgConnection,
    instance: &Instance,
    pinned: Option<i64>,
    config: &PlacementConfig,
) -> QueryResult<Option<Placement>> {
    let mut tried: Vec<i64> = Vec::new();
    for pass in [Pass::Shortlist, Pass::Everything, Pass::Wait] {
        for _ in 0..TRIES_PER_PASS {
            // A savepoint per try: a node that cannot take the instance is let go (its row lock
            // released with the savepoint) before the next is tried.
            let placed = conn.transaction(|conn| {
                let Some(node) = lock_best(conn, instance, pinned, config, pass, &tried)? else {
                    return Ok(None);
                };
                tried.push(node.id);
                allocate_on(conn, node, instance).map(Some)
            });
            match placed {
                Ok(Some(p)) => return Ok(Some(p)),
                Ok(None) => break,
                Err(diesel::result::Error::RollbackTransaction) => continue,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(None)
}

/// The filter every candidate node passes, on alias `n`, with the bind numbers `lock_best` uses.
const FITS: &str = "n.state = 'online' AND ($1::int8 IS NULL OR n.id = $1) \
    AND ($2 = 0 OR n.nvidia_runtime) \
    AND n.cpu_used + $3 <= n.cores * $4 \
    AND n.memory_bytes >= 1048576 \
    AND n.memory_used_mib + $5 <= (n.memory_bytes / 1048576) * $6 \
    AND n.disk_used_gib + $7 <= (n.disk_total_bytes / 1073741824) * $14 \
    AND n.instance_count <= n.ssh_port_last - n.ssh_port_first \
    AND n.id <> ALL($12)";

/// Finds and locks the best node for the instance by the committed counters: holding the image
/// first, then by memory left after placing (most first to spread, least first to pack). The
/// GPU test (a count over the node's GPUs) runs only on the `SHORTLIST` best by the cheap tests
/// in the first pass. The filter is repeated on the locked row, so a node another placement
/// changed while this one waited is re-checked on its newest counters.
fn lock_best(
    conn: &mut PgConnection,
    instance: &Instance,
    pinned: Option<i64>,
    config: &PlacementConfig,
    pass: Pass,
    tried: &[i64],
) -> QueryResult<Option<LockedNode>> {
    let shortlist = if pass == Pass::Shortlist {
        SHORTLIST
    } else {
        i64::MAX
    };
    let lock = if pass == Pass::Wait {
        "FOR UPDATE OF n"
    } else {
        "FOR UPDATE OF n SKIP LOCKED"
    };
    let fits_inner = FITS.replace("n.", "m.");
    diesel::sql_query(format!(
        "SELECT n.id, n.name, n.ssh_port_first, n.ssh_port_last \
         FROM nodes n JOIN ( \
             SELECT m.id, \
                    EXISTS (SELECT 1 FROM node_images ni \
                            WHERE ni.node_id = m.id AND ni.image_id = $10) AS holds, \
                    (CASE WHEN $11 THEN -1 ELSE 1 END) * (m.memory_used_mib + $5) \
                      / ((m.memory_bytes / 1048576) * $6) AS score \
             FROM nodes m WHERE {fits_inner} \
             ORDER BY holds DESC, score, m.id \
             LIMIT $13 \
         ) c ON c.id = n.id \
         WHERE {FITS} \
           AND ($2 = 0 OR (SELECT count(*) FROM gpus g WHERE g.node_id = n.id AND g.present \
                AND g.allocated < g.share_limit AND ($8::text IS NULL OR g.model = $8) \
                AND (NOT $9 OR g.share_limit = 1)) >= $2) \
         ORDER BY c.holds DESC, c.score, n.id \
         LIMIT 1 {lock}"
    ))
    .bind::<Nullable<BigInt>, _>(pinned)
    .bind::<Integer, _>(instance.gpu_count)
    .bind::<Integer, _>(instance.cpu)
    .bind::<Double, _>(config.cpu_overcommit)
    .bind::<BigInt, _>(instance.memory_mib)
    .bind::<Double, _>(config.memory_overcommit)
    .bind::<BigInt, _>(instance.disk_gib)
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .bind::<Bool, _>(instance.gpu_share == "exclusive")
    .bind::<BigInt, _>(instance.image_id)
    .bind::<Bool, _>(instance.strategy == "pack")
    .bind::<Array<BigInt>, _>(tried)
    .bind::<BigInt, _>(shortlist)
    .bind::<Double, _>(config.disk_overcommit)
    .get_result(conn)
    .optional()
}

/// A node row as locked for an allocation.
#[derive(QueryableByName)]
struct LockedNode {
    #[diesel(sql_type = BigInt)]
    id: i64,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Integer)]
    ssh_port_first: i32,
    #[diesel(sql_type = Integer)]
    ssh_port_last: i32,
}

/// Under the node's row lock: takes the GPU slots and the port. Rolls back (the caller's
/// savepoint) when the node cannot take the instance after all.
fn allocate_on(
    conn: &mut PgConnection,
    node: LockedNode,
    instance: &Instance,
) -> QueryResult<Placement> {
    let gpu_slots = allocate_gpus(conn, node.id, instance)?;
    if gpu_slots.len() < instance.gpu_count as usize {
        return Err(diesel::result::Error::RollbackTransaction);
    }
    let Some(port) = take_port(conn, &node, instance.id)? else {
        return Err(diesel::result::Error::RollbackTransaction);
    };
    Ok(Placement {
        node_id: node.id,
        node_name: node.name,
        ssh_port: port,
        gpu_slots: gpu_slots.iter().map(|g| (g.gpu_id, g.slot)).collect(),
    })
}

/// A GPU slot given to the instance.
#[derive(QueryableByName)]
struct TakenSlot {
    #[diesel(sql_type = BigInt)]
    gpu_id: i64,
    #[diesel(sql_type = Integer)]
    slot: i32,
}

/// Gives the instance up to `gpu_count` distinct GPUs of this node, of the model asked for,
/// exclusive ones (`share_limit` 1) for `exclusive`, the least used first, each at its lowest
/// free slot. Returns what it took; fewer than asked means the node cannot hold the instance.
fn allocate_gpus(
    conn: &mut PgConnection,
    node_id: i64,
    instance: &Instance,
) -> QueryResult<Vec<TakenSlot>> {
    if instance.gpu_count == 0 {
        return Ok(Vec::new());
    }
    diesel::sql_query(
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id) \
         SELECT g.id, g.share_limit, \
                (SELECT min(s)::int4 FROM generate_series(0, g.share_limit - 1) AS s \
                 WHERE NOT EXISTS (SELECT 1 FROM gpu_allocations a \
                                   WHERE a.gpu_id = g.id AND a.slot = s)), \
                $5 \
         FROM gpus g \
         WHERE g.node_id = $1 AND g.present AND g.allocated < g.share_limit \
           AND ($2::text IS NULL OR g.model = $2) AND (NOT $3 OR g.share_limit = 1) \
         ORDER BY g.allocated, g.idx \
         LIMIT $4 \
         RETURNING gpu_id, slot",
    )
    .bind::<BigInt, _>(node_id)
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .bind::<Bool, _>(instance.gpu_share == "exclusive")
    .bind::<BigInt, _>(i64::from(instance.gpu_count))
    .bind::<BigInt, _>(instance.id)
    .load(conn)
}

#[derive(QueryableByName)]
struct Port {
    #[diesel(sql_type = Nullable<Integer>)]
    ssh_port: Option<i32>,
}

/// Places the instance on the node at the lowest port of the node's range no instance holds
/// (the range's first port or one past a taken one, whichever is lowest and free); `None` when
/// the range is full.
fn take_port(
    conn: &mut PgConnection,
    node: &LockedNode,
    instance_id: i64,
) -> QueryResult<Option<i32>> {
    let row: Port = diesel::sql_query(
        "UPDATE instances SET node_id = $1, observed_state = 'pending', ssh_port = ( \
             SELECT min(c.p) FROM ( \
                 SELECT $2::int4 AS p \
                 UNION ALL SELECT ssh_port + 1 FROM instances \
                           WHERE node_id = $1 AND ssh_port BETWEEN $2 AND $3 \
             ) c \
             WHERE c.p <= $3 AND NOT EXISTS (SELECT 1 FROM instances i \
                                             WHERE i.node_id = $1 AND i.ssh_port = c.p)) \
         WHERE id = $4 \
         RETURNING ssh_port",
    )
    .bind::<BigInt, _>(node.id)
    .bind::<Integer, _>(node.ssh_port_first)
    .bind::<Integer, _>(node.ssh_port_last)
    .bind::<BigInt, _>(instance_id)
    .get_result(conn)?;
    Ok(row.ssh_port)
}
