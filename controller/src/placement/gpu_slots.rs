//! GPU slots an instance gives back and takes again. The reclaimer stops an idle container so
//! that someone waiting gets its GPU: once the container is stopped its `cohort-gpu*` devices
//! come off and its slots are released (the queue is woken). When it starts again it takes
//! slots on its own node (its container and home live there) under the same rules as placement,
//! and its devices are put back before the start; when no GPU there has room, the start waits
//! like a queued instance, with the reason on the instance and on the operation's item.

use cohort_proto::api::instances::GpuShare;
use diesel::prelude::*;

use crate::db::models::instance::Instance;
use crate::db::queries::capacity;

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
        capacity::lock_node(conn, node_id)?;
        let held = capacity::gpu_slots_held(conn, instance.id)?;
        let need = i64::from(instance.gpu_count) - held;
        if need <= 0 {
            return Ok(Taken::Held);
        }
        let took = capacity::take_gpu_slots(conn, instance, node_id, need)?;
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

/// Why the instance's node has no GPU for it, e.g. "waiting for a GPU: 1 NVIDIA L40S wanted on
/// node gpu-1, whose 1 such GPU is full (2 containers on it)".
fn shortage(conn: &mut PgConnection, instance: &Instance) -> QueryResult<String> {
    let node = capacity::node_name_of(conn, instance.id)?;
    let room = capacity::gpu_room(conn, instance)?;
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
