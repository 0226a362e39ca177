//! The placement queue: instances nothing could hold when asked for are placed, highest
//! priority first (then oldest), whenever capacity may have freed and on an interval. A queued
//! instance that still does not fit does not block smaller ones behind it (backfill).

use std::sync::Arc;
use std::time::Duration;

use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;

use crate::app::state::Controller;
use crate::db::models::instance::Instance;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionResult;
use crate::placement;

/// How many queued instances one pass considers.
const PASS: i64 = 500;

/// One pass over the queue; returns how many instances were placed.
pub fn place_queued(
    conn: &mut PgConnection,
    config: &crate::app::config::PlacementConfig,
) -> ActionResult<usize> {
    let mut placed = 0;
    for queued in Instance::queued(conn, PASS)? {
        let done = conn.transaction(|conn| -> ActionResult<bool> {
            // Another controller may be placing it: skip rather than wait.
            let Some(instance) = Instance::lock_skip(conn, queued.id)? else {
                return Ok(false);
            };
            if instance.node_id.is_some() || instance.desired_state == DesiredState::Deleted {
                return Ok(false);
            }
            let Some(p) = placement::place(conn, &instance, None, config)? else {
                return Ok(false);
            };
            let pending = OperationItem::pending_creates(conn, instance.id)?;
            for item in pending {
                OperationItem::set_placement(conn, item, &p.node_name, p.ssh_port)?;
            }
            Ok(true)
        })?;
        placed += usize::from(done);
    }
    Ok(placed)
}

/// Runs forever: a pass on every interval, and at once when capacity frees.
/// The queue's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "queue";

pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.placement.queue_interval_s.max(1));
    loop {
        ctl.loops.tick(LOOP);
        let config = ctl.config.placement.clone();
        match ctl.db(move |conn| place_queued(conn, &config)).await {
            Ok(n) if n > 0 => tracing::info!(placed = n, "placed queued instances"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "queue pass failed"),
        }
        if let Ok(n) = ctl.db(|conn| Ok(Instance::queued(conn, PASS)?.len())).await {
            ctl.metrics.queued_instances.set(n as i64);
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = ctl.capacity_freed.notified() => {}
        }
    }
}
