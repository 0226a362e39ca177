//! GPU slots an instance gives back and takes again. The reclaimer stops an idle container so
//! that someone waiting gets its GPU: once the container is stopped its `cohort-gpu*` devices
//! come off and its slots are released (the queue is woken). When it starts again it takes
//! slots on its own node (its container and home live there) under the same rules as placement,
//! and its devices are put back before the start; when no GPU there has room, the start waits
//! like a queued instance, with the reason on the instance and on the operation's item.

use cohort_proto::api::instances::GpuShare;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};

use crate::db::models::instance::Instance;
use crate::db::schema::{gpu_allocations, instances, nodes};

/// Prefix of the reason a start that waits for a GPU leaves on the instance (the poller keeps
/// it while the instance stays stopped).
pub const WAITING: &str = "waiting for a GPU:";

/// What a start found of the instance's GPU slots.
#[derive(Debug, PartialEq, Eq)]
pub enum Taken {
    /// It holds all it asks for already (nothing was released).
    Held,
    /// It took slots again just now: its devices must be put back.
    Again,
    /// No GPU on its node has room; why, in words.
    Short(String),
}

/// Takes the GPU slots the instance lacks on its node, all or none, under a lock on the node's
/// row (the one placement takes), so no two transactions hand out the same room.
pub fn take_again(conn: &mut PgConnection, instance: &Instance) -> QueryResult<Taken> {
    let Some(node_id) = instance.node_id else {
        return Ok(Taken::Held);
    };
    conn.transaction(|conn| {
        nodes::table
            .find(node_id)
            .select(nodes::id)
            .for_update()
            .get_result::<i64>(conn)?;
        let held: i64 = gpu_allocations::table
            .filter(gpu_allocations::instance_id.eq(instance.id))
            .count()
            .get_result(conn)?;
        let need = i64::from(instance.gpu_count) - held;
        if need <= 0 {
            return Ok(Taken::Held);
        }
        let took = diesel::sql_query(
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
        .execute(conn)?;
        if (took as i64) < need {
            // All or none: a part would hold GPUs the instance cannot start with.
            return Err(diesel::result::Error::RollbackTransaction);
        }
        Ok(Taken::Again)
    })
    .or_else(|e| match e {
        diesel::result::Error::RollbackTransaction => Ok(Taken::Short(shortage(conn, instance)?)),
        e => Err(e),
    })
}

#[derive(QueryableByName)]
struct Room {
    #[diesel(sql_type = BigInt)]
    gpus: i64,
    #[diesel(sql_type = BigInt)]
    holders: i64,
}

/// Why the instance's node has no GPU for it, e.g. "waiting for a GPU: 1 NVIDIA L40S wanted on
/// node gpu-1, whose 1 such GPU is full (2 containers on it)".
fn shortage(conn: &mut PgConnection, instance: &Instance) -> QueryResult<String> {
    let node: String = instances::table
        .inner_join(nodes::table)
        .filter(instances::id.eq(instance.id))
        .select(nodes::name)
        .first(conn)?;
    let room: Room = diesel::sql_query(
        "SELECT count(*) AS gpus, coalesce(sum(g.allocated), 0)::int8 AS holders FROM gpus g
         WHERE g.node_id = $1 AND g.present AND ($2::text IS NULL OR g.model = $2)",
    )
    .bind::<BigInt, _>(instance.node_id.unwrap_or_default())
    .bind::<Nullable<Text>, _>(instance.gpu_model.as_deref())
    .get_result(conn)?;
    let model = instance.gpu_model.as_deref().unwrap_or("GPU");
    let share = match instance.gpu_share_count {
        Some(n) => format!(", the course shares a GPU by at most {n}"),
        None if instance.gpu_share == GpuShare::Exclusive => ", exclusive".to_string(),
        None => String::new(),
    };
    Ok(format!(
        "{WAITING} {} {model} wanted on node {node}, whose {} such GPUs are full ({} containers on them{share})",
        instance.gpu_count, room.gpus, room.holders
    ))
}
