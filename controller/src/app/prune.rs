//! The pruner: keeps `audit_log`, `operations` (with their items) and the hourly GPU time
//! (`COHORT_GPU_USAGE_RETENTION_DAYS`) from growing without bound. Every `COHORT_PRUNE_INTERVAL_S` it deletes what is past its retention
//! (`COHORT_AUDIT_RETENTION_DAYS`, `COHORT_OPERATION_RETENTION_DAYS`; 0 keeps forever) in
//! batches, each batch its own short transaction under an advisory lock, so one controller
//! prunes at a time and no batch holds many locks for long.

use std::sync::Arc;
use std::time::Duration;

use diesel::prelude::*;

use crate::app::state::Controller;
use crate::db::queries::retention;
use crate::error::ActionResult;

/// Audit rows deleted per batch.
const AUDIT_BATCH: i64 = 5000;
/// Operations deleted per batch (a class's provision has hundreds of items).
const OPERATION_BATCH: i64 = 50;
/// Most batches of one table in one pass; the rest waits for the next pass.
const MAX_BATCHES: usize = 200;

pub async fn run(ctl: Arc<Controller>) {
    let every = Duration::from_secs(ctl.config.database.prune_interval_s.max(1));
    crate::app::fixed_rate::on_beat(every, || async {
        if let Err(e) = prune_once(&ctl).await {
            tracing::warn!(error = %e, "pruning failed");
        }
    })
    .await;
}

/// What one pass deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub audit_rows: usize,
    pub operations: usize,
    pub gpu_usage_hours: usize,
}

/// One pass: each table's rows past its retention, a batch at a time, until none is left, the
/// pass's batch limit is reached, or another controller holds the lock.
pub async fn prune_once(ctl: &Controller) -> ActionResult<Pruned> {
    let db = &ctl.config.database;
    let mut pruned = Pruned::default();
    if db.audit_retention_days > 0 {
        let days = db.audit_retention_days;
        pruned.audit_rows = batches(ctl, AUDIT_BATCH, move |conn| {
            retention::prune_audit(conn, days, AUDIT_BATCH)
        })
        .await?;
    }
    if db.operation_retention_days > 0 {
        let days = db.operation_retention_days;
        pruned.operations = batches(ctl, OPERATION_BATCH, move |conn| {
            retention::prune_operations(conn, days, OPERATION_BATCH)
        })
        .await?;
    }
    if db.gpu_usage_retention_days > 0 {
        let days = db.gpu_usage_retention_days;
        pruned.gpu_usage_hours = batches(ctl, AUDIT_BATCH, move |conn| {
            crate::db::queries::gpu_usage::prune(conn, days, AUDIT_BATCH)
        })
        .await?;
    }
    if pruned != Pruned::default() {
        tracing::info!(
            audit_rows = pruned.audit_rows,
            operations = pruned.operations,
            gpu_usage_hours = pruned.gpu_usage_hours,
            "pruned"
        );
    }
    Ok(pruned)
}

/// Runs `delete` (one batch of at most `batch` rows) in its own transaction under the lock
/// until a batch comes back short; the rows deleted.
async fn batches<F>(ctl: &Controller, batch: i64, delete: F) -> ActionResult<usize>
where
    F: Fn(&mut PgConnection) -> QueryResult<usize> + Clone + Send + 'static,
{
    let mut total = 0;
    for _ in 0..MAX_BATCHES {
        let delete = delete.clone();
        let done = ctl
            .db(move |conn| {
                conn.transaction(|conn| {
                    if !retention::try_lock(conn)? {
                        return Ok(None);
                    }
                    Ok(Some(delete(conn)?))
                })
            })
            .await?;
        match done {
            None => break,
            Some(n) => {
                total += n;
                if (n as i64) < batch {
                    break;
                }
            }
        }
    }
    Ok(total)
}
