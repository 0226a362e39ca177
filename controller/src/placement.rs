//! Placement: filter the nodes that can hold an instance (online, not cordoned, cpu, memory,
//! disk, GPUs of the model asked for with room under `share_limit`, a free SSH port), score them
//! (spread or pack, holding the image first), then allocate the port and GPU slots on the best
//! one. Runs inside the caller's transaction, so the instance row, its port and its GPU slots
//! commit together; the unique indexes are the last guard.

use diesel::prelude::*;

use crate::config::PlacementConfig;
use crate::models::gpu::Gpu;
use crate::models::gpu_allocation::GpuAllocation;
use crate::models::image::Image;
use crate::models::instance::Instance;
use crate::models::node::Node;

/// Where an instance went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node_id: i64,
    pub node_name: String,
    pub ssh_port: i32,
    /// (gpu id, slot) pairs.
    pub gpu_slots: Vec<(i64, i32)>,
}

/// A node's fit for an instance, computed from a snapshot of the inventory.
struct Fit {
    node: Node,
    holds_image: bool,
    /// Fraction of memory left after placing; spread prefers more, pack less.
    memory_left: f64,
}

/// Tries to place `instance`; `None` when no node can hold it now. Only nodes named in `pinned`
/// are considered when it is set.
pub fn place(
    conn: &mut PgConnection,
    instance: &Instance,
    pinned: Option<i64>,
    config: &PlacementConfig,
) -> QueryResult<Option<Placement>> {
    let mut fits = Vec::new();
    for node in Node::list(conn)? {
        if node.state != "online" || pinned.is_some_and(|id| id != node.id) {
            continue;
        }
        if instance.gpu_count > 0 && !node.nvidia_runtime {
            continue;
        }
        let Some(memory_left) = capacity_left(conn, &node, instance, config)? else {
            continue;
        };
        if choose_gpus(conn, &node, instance)?.is_none() || free_port(conn, &node)?.is_none() {
            continue;
        }
        let holds_image = Image::held_by(conn, instance.image_id, node.id)?;
        fits.push(Fit {
            node,
            holds_image,
            memory_left,
        });
    }
    let pack = instance.strategy == "pack";
    fits.sort_by(|a, b| {
        b.holds_image.cmp(&a.holds_image).then_with(|| {
            let order = a.memory_left.total_cmp(&b.memory_left);
            if pack {
                order
            } else {
                order.reverse()
            }
        })
    });
    for fit in fits {
        // A savepoint per candidate: a node that no longer fits once locked is let go (its row
        // lock released with the savepoint) before the next is tried, so two placements never
        // hold one node each while waiting for the other's.
        let placed = conn.transaction(|conn| allocate_on(conn, fit.node.id, instance, config));
        match placed {
            Ok(Some(p)) => return Ok(Some(p)),
            Ok(None) | Err(diesel::result::Error::RollbackTransaction) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// Under the node's row lock: re-checks the fit against the committed state and allocates.
fn allocate_on(
    conn: &mut PgConnection,
    node_id: i64,
    instance: &Instance,
    config: &PlacementConfig,
) -> QueryResult<Option<Placement>> {
    let node = Node::lock(conn, node_id)?;
    if node.state != "online" || capacity_left(conn, &node, instance, config)?.is_none() {
        return Err(diesel::result::Error::RollbackTransaction);
    }
    let Some(gpu_slots) = choose_gpus(conn, &node, instance)? else {
        return Err(diesel::result::Error::RollbackTransaction);
    };
    let Some(port) = free_port(conn, &node)? else {
        return Err(diesel::result::Error::RollbackTransaction);
    };
    Instance::place(conn, instance.id, node.id, port)?;
    for (gpu, slot) in &gpu_slots {
        GpuAllocation::insert(conn, gpu.id, gpu.share_limit, *slot, instance.id)?;
    }
    Ok(Some(Placement {
        node_id: node.id,
        node_name: node.name,
        ssh_port: port,
        gpu_slots: gpu_slots.iter().map(|(g, s)| (g.id, *s)).collect(),
    }))
}

/// Fraction of memory left after adding the instance, or `None` when cpu, memory or disk would
/// go over the node's capacity (with the configured overcommit).
fn capacity_left(
    conn: &mut PgConnection,
    node: &Node,
    instance: &Instance,
    config: &PlacementConfig,
) -> QueryResult<Option<f64>> {
    let used = Instance::usage_on(conn, node.id)?;
    let cpu_cap = f64::from(node.cores) * config.cpu_overcommit;
    let mem_cap = node.memory_bytes as f64 / 1_048_576.0 * config.memory_overcommit;
    let disk_cap = node.disk_total_bytes as f64 / 1_073_741_824.0;
    let cpu = (used.cpu + i64::from(instance.cpu)) as f64;
    let mem = (used.memory_mib + instance.memory_mib) as f64;
    let disk = (used.disk_gib + instance.disk_gib) as f64;
    if cpu > cpu_cap || mem > mem_cap || disk > disk_cap || mem_cap <= 0.0 {
        return Ok(None);
    }
    Ok(Some(1.0 - mem / mem_cap))
}

/// The GPUs and slots the instance would get on this node: `gpu_count` distinct GPUs of the
/// model asked for, exclusive ones (`share_limit` 1) for `exclusive`, each with its lowest free
/// slot, the least used first.
fn choose_gpus(
    conn: &mut PgConnection,
    node: &Node,
    instance: &Instance,
) -> QueryResult<Option<Vec<(Gpu, i32)>>> {
    if instance.gpu_count == 0 {
        return Ok(Some(Vec::new()));
    }
    let mut candidates = Vec::new();
    for gpu in Gpu::for_node(conn, node.id)? {
        if !gpu.present
            || instance.gpu_model.as_ref().is_some_and(|m| *m != gpu.model)
            || (instance.gpu_share == "exclusive" && gpu.share_limit != 1)
        {
            continue;
        }
        let taken = GpuAllocation::slots(conn, gpu.id)?;
        if let Some(slot) = (0..gpu.share_limit).find(|s| !taken.contains(s)) {
            candidates.push((taken.len(), gpu, slot));
        }
    }
    if candidates.len() < instance.gpu_count as usize {
        return Ok(None);
    }
    candidates.sort_by_key(|(used, gpu, _)| (*used, gpu.idx));
    Ok(Some(
        candidates
            .into_iter()
            .take(instance.gpu_count as usize)
            .map(|(_, gpu, slot)| (gpu, slot))
            .collect(),
    ))
}

/// The lowest port of the node's range no instance holds.
fn free_port(conn: &mut PgConnection, node: &Node) -> QueryResult<Option<i32>> {
    let taken = Instance::ports_on(conn, node.id)?;
    Ok((node.ssh_port_first..=node.ssh_port_last).find(|p| !taken.contains(p)))
}
