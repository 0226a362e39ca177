//! Whether any node could ever hold a request, however much else were freed: its whole capacity
//! (with the overcommit placement allows), its GPUs of the model asked for, the NVIDIA runtime.
//! A request that fits nowhere now is queued only when it could fit once capacity frees; one no
//! node could ever hold (a GPU on a lab without one, more memory than any node has) is refused
//! with the reason, rather than queued for ever with its operation `running`.
//!
//! A lab with no nodes yet, or with a node that has not reported its capacity, is being set up:
//! anything may fit there later, so nothing is refused.

use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::queries::capacity;
use crate::error::{ActionError, ActionResult};

/// What one instance needs.
#[derive(Debug, Clone, Copy)]
pub struct Need<'a> {
    pub cpu: i32,
    pub memory_mib: i64,
    /// The root disk and, for a course's student, the home volume.
    pub disk_gib: i64,
    pub gpus: i32,
    pub gpu_model: Option<&'a str>,
    pub exclusive: bool,
}

/// The request's field names for cpu, memory, disk, GPU count and GPU model.
pub type Fields = [&'static str; 5];

/// `POST /instances`.
pub const INSTANCE_FIELDS: Fields = [
    "limits.cpu",
    "limits.memory_mib",
    "limits.disk_gib",
    "gpus",
    "gpu_model",
];

/// A course's per-student size.
pub const COURSE_FIELDS: Fields = ["cpu", "memory_mib", "disk_gib", "gpus", "gpu_model"];

/// A node's whole capacity, as placement counts it.
struct Capacity {
    id: i64,
    reported: bool,
    runtime: bool,
    cpu: f64,
    memory_mib: f64,
    disk_gib: f64,
    ports: bool,
}

/// Refuses (409, naming the field) a request that no node (only `pinned` when set) could ever
/// hold.
pub fn check(
    conn: &mut PgConnection,
    need: &Need<'_>,
    pinned: Option<i64>,
    config: &PlacementConfig,
    fields: Fields,
) -> ActionResult<()> {
    let rows = capacity::node_capacity(conn, pinned)?;
    let nodes: Vec<Capacity> = rows
        .into_iter()
        .map(
            |(id, cores, memory, disk, pool, runtime, first, last)| Capacity {
                id,
                // Placement skips nodes with less than 1 MiB of memory: not reported yet.
                reported: memory >= 1 << 20,
                runtime,
                cpu: f64::from(cores) * config.cpu_overcommit,
                memory_mib: (memory >> 20) as f64 * config.memory_overcommit,
                // Placement keeps a tenth of a reported pool free, whatever the overcommit.
                disk_gib: match pool {
                    0 => (disk >> 30) as f64 * config.disk_overcommit,
                    pool => ((disk >> 30) as f64 * config.disk_overcommit)
                        .min(pool as f64 * 0.9 / (1u64 << 30) as f64),
                },
                ports: last >= first,
            },
        )
        .collect();
    if nodes.is_empty() || nodes.iter().any(|n| !n.reported) {
        return Ok(());
    }
    let gpus: Vec<(i64, String, i32)> = if need.gpus > 0 {
        capacity::present_gpus(conn, nodes.iter().map(|n| n.id))?
    } else {
        Vec::new()
    };
    let model_ok = |model: &str| need.gpu_model.is_none_or(|m| m == model);
    let gpus_on = |node: &Capacity| {
        gpus.iter()
            .filter(|(n, model, share)| {
                *n == node.id && model_ok(model) && (!need.exclusive || *share == 1)
            })
            .count() as i64
    };
    let fits = |n: &Capacity| {
        (need.gpus == 0 || (n.runtime && gpus_on(n) >= i64::from(need.gpus)))
            && f64::from(need.cpu) <= n.cpu
            && need.memory_mib as f64 <= n.memory_mib
            && need.disk_gib as f64 <= n.disk_gib
            && n.ports
    };
    if nodes.iter().any(fits) {
        return Ok(());
    }
    let gpus_fit = need.gpus == 0
        || nodes
            .iter()
            .any(|n| n.runtime && gpus_on(n) >= i64::from(need.gpus));
    Err(reason(need, &nodes, &gpus, gpus_fit, fields))
}

/// Why nothing fits: the first need no node meets alone, or that no node meets them together.
fn reason(
    need: &Need<'_>,
    nodes: &[Capacity],
    gpus: &[(i64, String, i32)],
    gpus_fit: bool,
    [cpu, memory, disk, gpu_count, gpu_model]: Fields,
) -> ActionError {
    let most = |f: fn(&Capacity) -> f64| nodes.iter().map(f).fold(0.0, f64::max);
    if !gpus_fit {
        if let Some(model) = need.gpu_model {
            if !gpus.iter().any(|(_, m, _)| m == model) {
                return ActionError::conflict(
                    Some(gpu_model),
                    format!("no node has a GPU of model {model}"),
                );
            }
        }
        return ActionError::conflict(
            Some(gpu_count),
            format!(
                "no node can ever give {} {}GPUs{} (with the NVIDIA runtime)",
                need.gpus,
                if need.exclusive { "exclusive " } else { "" },
                need.gpu_model
                    .map(|m| format!(" of model {m}"))
                    .unwrap_or_default()
            ),
        );
    }
    for (field, asked, has, unit) in [
        (cpu, f64::from(need.cpu), most(|n| n.cpu), "cores"),
        (
            memory,
            need.memory_mib as f64,
            most(|n| n.memory_mib),
            "MiB",
        ),
        (disk, need.disk_gib as f64, most(|n| n.disk_gib), "GiB"),
    ] {
        if asked > has {
            return ActionError::conflict(
                Some(field),
                format!("{asked} {unit} is more than any node has ({has} {unit} at most)"),
            );
        }
    }
    ActionError::conflict(
        Some(memory),
        "no single node has this cpu, memory, disk and these GPUs together",
    )
}
