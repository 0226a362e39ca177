//! Moving an instance to another node, as the database sees it (the queries are
//! [`crate::db::queries::capacity`]'s): whether a node has room for it
//! (as placement judges, with the same SQL functions: online, cpu, memory, disk for the root and
//! the home, a free SSH port, GPUs of its model with room), which node an evacuation sends it
//! to, and the one transaction that makes it the other node's: its node, a port allocated there
//! (its old one freed by the same update), and its GPU slots given back on the old node and
//! taken on the new one. The unique index on (node, port) is the last guard, as for placement.

use cohort_proto::api::nodes::NodeState;
use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::orphan::Orphan;
use crate::db::queries::capacity;
use crate::error::{ActionError, ActionResult};
use crate::placement::gpu_slots;

/// Why node `to` cannot take `instance` now; `None` when it can.
pub fn shortage(
    conn: &mut PgConnection,
    instance: &Instance,
    to: &Node,
    config: &PlacementConfig,
) -> QueryResult<Option<String>> {
    let Some(fit) = capacity::move_room(conn, instance, config, Some(to.id))? else {
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
    let found = capacity::move_room(conn, instance, config, None)?;
    found.map(|f| Node::find(conn, f.id)).transpose()
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
        let instance = Instance::lock(conn, id)?;
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
        let to = Node::lock(conn, to.id)?;
        if check_room {
            if let Some(why) = shortage(conn, &instance, &to, config)? {
                return Err(ActionError::NoCapacity(why));
            }
        }
        let port = capacity::free_port(conn, &to, &instance.name, instance.ssh_port)?.ok_or_else(
            || ActionError::NoCapacity(format!("node {} has no free SSH port", to.name)),
        )?;
        GpuAllocation::release(conn, id)?;
        // The container of its name on `to` is its own copy, which a poll may have listed as an
        // orphan between the copy and now (or, for a copy kept from before a restored backup,
        // long since): it is this instance's from now on, its port with it.
        Orphan::delete(conn, to.id, &instance.name)?;
        Instance::move_to(conn, id, to.id, port)?;
        if instance.gpu_count > 0 {
            let moved = Instance::find(conn, id)?;
            if let gpu_slots::Taken::Short(why) = gpu_slots::take_again(conn, &moved)? {
                return Err(ActionError::NoCapacity(why));
            }
        }
        Ok(Committed::Moved { port })
    })
}
