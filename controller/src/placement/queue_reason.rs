//! Why a queued instance waits, in words a student or an instructor can act on: the resource
//! no node has enough of ("needs 10 GiB of disk; largest free on any node: 3 GiB"), or that no
//! node is online, or that no single node has all of it at once. Kept on the instance (`error`,
//! with the [`QUEUED`] prefix) whenever placement finds no room, so `cohort info`, the API and a
//! course provision's items show it.

use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::queries::capacity::{self, Free};

/// Prefix of a queued instance's reason.
pub const QUEUED: &str = "queued:";

/// What an instance asks of a node: the shape the capacity queries read.
pub use crate::db::queries::capacity::Need;

/// Why no node can hold `need` now.
pub fn why(
    conn: &mut PgConnection,
    need: &Need<'_>,
    config: &PlacementConfig,
) -> QueryResult<String> {
    let free = capacity::most_free(conn, need, config)?;
    Ok(format!("{QUEUED} {}", explain(need, &free)))
}

fn explain(need: &Need<'_>, free: &Free) -> String {
    if free.online == 0 {
        return match free.nodes {
            0 => "no node is enrolled".to_string(),
            n => format!("no node is online (of {n}: offline, cordoned or evacuating)"),
        };
    }
    let floor = |v: Option<f64>| v.unwrap_or(0.0).max(0.0).floor() as i64;
    if need.gpu_count > 0 && free.gpus.unwrap_or(0) < i64::from(need.gpu_count) {
        let model = need.gpu_model.map(|m| format!(" {m}")).unwrap_or_default();
        let how = match (need.exclusive, need.share) {
            (true, _) => " to itself",
            (false, Some(_)) => " shared within the course's gpu_share",
            (false, None) => "",
        };
        return format!(
            "needs {}{model} GPU{}{how}; most free on any node: {}",
            need.gpu_count,
            if need.gpu_count == 1 { "" } else { "s" },
            free.gpus.unwrap_or(0)
        );
    }
    if f64::from(need.cpu) > free.cpu.unwrap_or(0.0) {
        return format!(
            "needs {} CPU; most free on any node: {}",
            need.cpu,
            floor(free.cpu)
        );
    }
    if need.memory_mib as f64 > free.memory_mib.unwrap_or(0.0) {
        return format!(
            "needs {} MiB of memory; most free on any node: {} MiB",
            need.memory_mib,
            floor(free.memory_mib)
        );
    }
    if need.disk_gib as f64 > free.disk_gib.unwrap_or(0.0) {
        return format!(
            "needs {} GiB of disk; largest free on any node: {} GiB",
            need.disk_gib,
            floor(free.disk_gib)
        );
    }
    if free.ports.unwrap_or(0) < 1 {
        return "no node has a free SSH port".to_string();
    }
    format!(
        "no single node has room for all of it at once ({} CPU, {} MiB of memory, {} GiB of disk, {} GPUs)",
        need.cpu, need.memory_mib, need.disk_gib, need.gpu_count
    )
}
