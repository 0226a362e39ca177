//! Capacity on the nodes as placement's neighbours read and take it: GPU slots given back and
//! taken again, the most any node has free (a queued instance's reason), a move target's room
//! and port, and the nodes' capacity columns a request is checked against.

use cohort_proto::api::instances::GpuShare;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Double, Integer, Nullable, Text};

use crate::app::config::PlacementConfig;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::schema::{gpu_allocations, gpus, instances, nodes};

/// What an instance asks of a node.
pub struct Need<'a> {
    pub cpu: i32,
    pub memory_mib: i64,
    /// The root disk and the home volume together.
    pub disk_gib: i64,
    pub gpu_count: i32,
    pub gpu_model: Option<&'a str>,
    pub exclusive: bool,
    pub share: Option<i32>,
}

/// Locks node `id`'s row (the lock placement takes), so no two transactions hand out the same
/// room.
pub fn lock_node(conn: &mut PgConnection, id: i64) -> QueryResult<i64> {
    nodes::table
        .find(id)
        .select(nodes::id)
        .for_update()
        .get_result::<i64>(conn)
}

/// How many GPU slots instance `id` holds.
pub fn gpu_slots_held(conn: &mut PgConnection, id: i64) -> QueryResult<i64> {
    gpu_allocations::table
        .filter(gpu_allocations::instance_id.eq(id))
        .count()
        .get_result(conn)
}

/// Takes up to `need` GPU slots for `instance` on node `node_id`, one per GPU with room (the
/// least allocated first); returns how many it took.
pub fn take_gpu_slots(
    conn: &mut PgConnection,
    instance: &Instance,
    node_id: i64,
    need: i64,
) -> QueryResult<usize> {
    diesel::sql_query(
        "INSERT INTO gpu_allocations (gpu_id, share_limit, slot, instance_id, share_count)
             SELECT g.id, g.share_limit,
                    (SELECT min(s)::int4 FROM generate_series(0, g.share_limit - 1) AS s
                     WHERE NOT EXISTS (SELECT 1 FROM gpu_allocations a
                                       WHERE a.gpu_id = g.id AND a.slot = s)),
                    $1, $2
             FROM gpus g
             WHERE g.node_id = $3 AND g.present
               AND g.allocated < cohort_gpu_room(g, $2)
               AND ($4::text IS NULL OR g.model = $4)
               AND (NOT $5 OR g.share_limit = 1)
               AND NOT EXISTS (SELECT 1 FROM gpu_allocations a
                               WHERE a.gpu_id = g.id AND a.instance_id = $1)
             ORDER BY g.allocated, g.idx
             LIMIT $6",
    )
    .bind::<BigInt, _>(instance.id)
    .bind::<Nullable<Integer>, _>(instance.gpu_share_count)
    .bind::<BigInt, _>(node_id)
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .bind::<Bool, _>(instance.gpu_share == GpuShare::Exclusive)
    .bind::<BigInt, _>(need)
    .execute(conn)
}

/// The name of instance `id`'s node.
pub fn node_name_of(conn: &mut PgConnection, id: i64) -> QueryResult<String> {
    instances::table
        .inner_join(nodes::table)
        .filter(instances::id.eq(id))
        .select(nodes::name)
        .first(conn)
}

/// The GPUs of an instance's model on its node, and how many containers hold them.
#[derive(QueryableByName)]
pub struct GpuRoom {
    #[diesel(sql_type = BigInt)]
    pub gpus: i64,
    #[diesel(sql_type = BigInt)]
    pub holders: i64,
}

/// The GPUs of `instance`'s model on its node.
pub fn gpu_room(conn: &mut PgConnection, instance: &Instance) -> QueryResult<GpuRoom> {
    diesel::sql_query(
        "SELECT count(*) AS gpus, coalesce(sum(g.allocated), 0)::int8 AS holders FROM gpus g
         WHERE g.node_id = $1 AND g.present AND ($2::text IS NULL OR g.model = $2)",
    )
    .bind::<BigInt, _>(instance.node_id.unwrap_or_default())
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .get_result(conn)
}

/// The most any one online node has free of each resource, by the counters placement uses
/// (disk: the lesser of what its reservations leave and what its pool has before the last
/// tenth).
#[derive(QueryableByName)]
pub struct Free {
    #[diesel(sql_type = BigInt)]
    pub nodes: i64,
    #[diesel(sql_type = BigInt)]
    pub online: i64,
    #[diesel(sql_type = Nullable<Double>)]
    pub cpu: Option<f64>,
    #[diesel(sql_type = Nullable<Double>)]
    pub memory_mib: Option<f64>,
    #[diesel(sql_type = Nullable<Double>)]
    pub disk_gib: Option<f64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub ports: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub gpus: Option<i64>,
}

/// The most any one online node has free of what `need` asks for.
pub fn most_free(
    conn: &mut PgConnection,
    need: &Need<'_>,
    config: &PlacementConfig,
) -> QueryResult<Free> {
    diesel::sql_query(
        "SELECT count(*) AS nodes,
                count(*) FILTER (WHERE n.state = 'online') AS online,
                max(n.cores * $1 - n.cpu_used) FILTER (WHERE n.state = 'online') AS cpu,
                max((n.memory_bytes / 1048576) * $2 - n.memory_used_mib)
                    FILTER (WHERE n.state = 'online') AS memory_mib,
                max(least((n.disk_total_bytes / 1073741824) * $3 - n.disk_used_gib,
                          CASE WHEN n.pool_total_bytes = 0 THEN NULL
                               ELSE (n.pool_total_bytes * 0.9 - n.pool_used_bytes)
                                    / 1073741824 END))
                    FILTER (WHERE n.state = 'online') AS disk_gib,
                max((n.ssh_port_last - n.ssh_port_first + 1 - n.instance_count)::int8)
                    FILTER (WHERE n.state = 'online') AS ports,
                CASE WHEN $4 = 0 THEN NULL ELSE
                    max(cohort_node_free_gpus(n.id, $5, $6, $7))
                        FILTER (WHERE n.state = 'online' AND n.nvidia_runtime) END AS gpus
         FROM nodes n",
    )
    .bind::<Double, _>(config.cpu_overcommit)
    .bind::<Double, _>(config.memory_overcommit)
    .bind::<Double, _>(config.disk_overcommit)
    .bind::<Integer, _>(need.gpu_count)
    .bind::<Nullable<Text>, _>(need.gpu_model)
    .bind::<Bool, _>(need.exclusive)
    .bind::<Nullable<Integer>, _>(need.share)
    .get_result(conn)
}

/// A node as a move sees it: whether the instance fits there (cores, memory, disk with its
/// home, an SSH port) and whether GPUs of its model have room.
#[derive(QueryableByName)]
pub struct MoveRoom {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = Bool)]
    pub fits: bool,
    #[diesel(sql_type = Bool)]
    pub gpus: bool,
}

#[derive(QueryableByName)]
struct Port {
    #[diesel(sql_type = Integer)]
    port: i32,
}

/// Node `only` as a move sees it; without `only`, the least loaded other node than the
/// instance's own where it fits (placement's spread), `None` when none does.
pub fn move_room(
    conn: &mut PgConnection,
    instance: &Instance,
    config: &PlacementConfig,
    only: Option<i64>,
) -> QueryResult<Option<MoveRoom>> {
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
pub fn free_port(
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

/// (id, cores, memory bytes, disk bytes, pool bytes, NVIDIA runtime, first port, last port).
pub type CapacityRow = (i64, i32, i64, i64, i64, bool, i32, i32);

/// Each node's capacity columns (only node `pinned`'s when set): id, cores, memory, disk,
/// pool, NVIDIA runtime, first and last SSH port.
pub fn node_capacity(
    conn: &mut PgConnection,
    pinned: Option<i64>,
) -> QueryResult<Vec<CapacityRow>> {
    let mut q = nodes::table
        .select((
            nodes::id,
            nodes::cores,
            nodes::memory_bytes,
            nodes::disk_total_bytes,
            nodes::pool_total_bytes,
            nodes::nvidia_runtime,
            nodes::ssh_port_first,
            nodes::ssh_port_last,
        ))
        .into_boxed();
    if let Some(id) = pinned {
        q = q.filter(nodes::id.eq(id));
    }
    q.load(conn)
}

/// The present GPUs of nodes `node_ids`: node, model, share limit.
pub fn present_gpus(
    conn: &mut PgConnection,
    node_ids: impl IntoIterator<Item = i64>,
) -> QueryResult<Vec<(i64, String, i32)>> {
    gpus::table
        .filter(gpus::present)
        .filter(gpus::node_id.eq_any(node_ids))
        .select((gpus::node_id, gpus::model, gpus::share_limit))
        .load(conn)
}
