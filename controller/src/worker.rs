//! The job worker: claims operations with `FOR UPDATE SKIP LOCKED` under a lease, runs their
//! items in order (each idempotent, the item id being the agent's idempotency key), retries
//! with backoff, and records progress so another worker can resume after a crash.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::sync::Semaphore;

use crate::controller::Controller;
use crate::error::ActionError;
use crate::metrics::Metrics;
use crate::models::operation::Operation;
use crate::models::operation_item::OperationItem;
use crate::steps::{run_step, StepOutcome};

/// How long an idle worker sleeps before looking for work again.
const IDLE: Duration = Duration::from_millis(500);

/// Runs forever, at most `worker.concurrency` operations at a time.
pub async fn run(ctl: Arc<Controller>) {
    let worker = ctl.config.worker_id();
    let slots = Arc::new(Semaphore::new(ctl.config.worker.concurrency.max(1)));
    tracing::info!(%worker, "job worker started");
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        match claim(&ctl, &worker).await {
            Ok(Some(op)) => {
                let ctl = ctl.clone();
                let worker = worker.clone();
                tokio::spawn(async move {
                    let id = op.id;
                    if let Err(e) = process(&ctl, &worker, op).await {
                        tracing::warn!(operation = %id, error = %e, "operation interrupted; its lease will expire");
                    }
                    drop(permit);
                });
            }
            Ok(None) => {
                drop(permit);
                tokio::time::sleep(IDLE).await;
            }
            Err(e) => {
                drop(permit);
                tracing::warn!(error = %e, "claiming work failed");
                tokio::time::sleep(IDLE * 4).await;
            }
        }
    }
}

fn lease(ctl: &Controller) -> chrono::Duration {
    chrono::Duration::seconds(ctl.config.worker.lease_s.max(1) as i64)
}

async fn claim(ctl: &Controller, worker: &str) -> Result<Option<Operation>, ActionError> {
    let worker = worker.to_string();
    let lease = lease(ctl);
    ctl.db(move |conn| {
        let now = Utc::now();
        Ok(Operation::claim(conn, &worker, now, now + lease)?)
    })
    .await
}

/// Keeps the lease alive while the operation runs; sets `lost` if another worker took it.
fn keep_lease(
    ctl: Arc<Controller>,
    id: uuid::Uuid,
    worker: String,
    lost: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let every = Duration::from_secs((ctl.config.worker.lease_s / 3).max(1));
        loop {
            tokio::time::sleep(every).await;
            let (w, lease) = (worker.clone(), lease(&ctl));
            let renewed = ctl
                .db(move |conn| Ok(Operation::renew(conn, id, &w, Utc::now() + lease)?))
                .await;
            if matches!(renewed, Ok(false)) {
                lost.store(true, Ordering::SeqCst);
                return;
            }
        }
    })
}

/// Backoff before retry `attempt` (1-based): base * 2^(attempt-1), at most a minute.
pub fn backoff(base_s: u64, attempt: u32) -> Duration {
    let factor = 1u64 << attempt.saturating_sub(1).min(10);
    Duration::from_secs((base_s.max(1) * factor).min(60))
}

async fn process(ctl: &Arc<Controller>, worker: &str, op: Operation) -> Result<(), ActionError> {
    let lost = Arc::new(AtomicBool::new(false));
    let renewer = keep_lease(ctl.clone(), op.id, worker.to_string(), lost.clone());
    let result = run_items(ctl, worker, &op, &lost).await;
    renewer.abort();
    result
}

async fn run_items(
    ctl: &Controller,
    worker: &str,
    op: &Operation,
    lost: &AtomicBool,
) -> Result<(), ActionError> {
    let id = op.id;
    let items = ctl
        .db(move |conn| Ok(OperationItem::for_operation(conn, id)?))
        .await?;
    for item in items
        .iter()
        .filter(|i| i.status == "pending" || i.status == "running")
    {
        if lost.load(Ordering::SeqCst) {
            return Err(ActionError::Internal("lease lost to another worker".into()));
        }
        let outcome = run_step(ctl, op, item).await;
        Metrics::count(&ctl.metrics.operation_steps, outcome.label());
        let item_id = item.id;
        let w = worker.to_string();
        match outcome {
            StepOutcome::Done => {
                ctl.db(move |conn| Ok(OperationItem::finish(conn, item_id, "success", None)?))
                    .await?;
            }
            StepOutcome::Cancelled(why) => {
                ctl.db(move |conn| {
                    Ok(OperationItem::finish(
                        conn,
                        item_id,
                        "cancelled",
                        Some(&why),
                    )?)
                })
                .await?;
            }
            StepOutcome::Failed(why) => {
                ctl.db(move |conn| {
                    Ok(OperationItem::finish(conn, item_id, "failure", Some(&why))?)
                })
                .await?;
            }
            StepOutcome::Wait(delay) => {
                let at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
                ctl.db(move |conn| Ok(Operation::release(conn, id, &w, at)?))
                    .await?;
                return Ok(());
            }
            StepOutcome::Retry(why) => {
                let attempts = item.attempts as u32 + 1;
                if attempts >= ctl.config.worker.max_attempts {
                    let why = format!("gave up after {attempts} attempts: {why}");
                    ctl.db(move |conn| {
                        Ok(OperationItem::finish(conn, item_id, "failure", Some(&why))?)
                    })
                    .await?;
                    continue;
                }
                let delay = backoff(ctl.config.worker.backoff_s, attempts);
                let at = Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default();
                ctl.db(move |conn| {
                    OperationItem::note_error(conn, item_id, &why)?;
                    Ok(Operation::release(conn, id, &w, at)?)
                })
                .await?;
                return Ok(());
            }
        }
    }
    finish(ctl, id).await
}

/// Final status: success when every item succeeded or was cancelled, else failure.
async fn finish(ctl: &Controller, id: uuid::Uuid) -> Result<(), ActionError> {
    ctl.db(move |conn| {
        let items = OperationItem::for_operation(conn, id)?;
        let failed = items.iter().filter(|i| i.status == "failure").count();
        if failed == 0 {
            Operation::finish(conn, id, "success", None)?;
        } else {
            let msg = format!("{failed} of {} items failed", items.len());
            Operation::finish(conn, id, "failure", Some(&msg))?;
        }
        Ok(())
    })
    .await?;
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::backoff;
    use std::time::Duration;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        assert_eq!(backoff(2, 1), Duration::from_secs(2));
        assert_eq!(backoff(2, 2), Duration::from_secs(4));
        assert_eq!(backoff(2, 3), Duration::from_secs(8));
        assert_eq!(backoff(2, 30), Duration::from_secs(60));
    }
}
