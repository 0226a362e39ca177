//! The job worker: claims operations with `FOR UPDATE SKIP LOCKED` under a lease, runs their
//! items (each idempotent, the item id being the agent's idempotency key), retries
//! with backoff, and records progress so another worker can resume after a crash.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use cohort_proto::api::operations::OperationStatus;
use tokio::sync::Semaphore;

use super::step::run_step;
use super::StepOutcome;
use crate::app::metrics::Metrics;
use crate::app::state::Controller;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::error::ActionError;
use crate::jobs::StepKind;

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

/// Runs the operation's unfinished items. Items of one instance run in order (a reset is a
/// delete then a create); different instances run at once, at most `items_per_node` on one node,
/// so a class of 60 is made in parallel rather than one container after another. When any item
/// must wait (queued, or a retry with backoff) the operation is handed back to run again at the
/// earliest such time; otherwise it is finished.
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
    let mut groups: Vec<Vec<OperationItem>> = Vec::new();
    for item in items
        .into_iter()
        .filter(|i| i.status == OperationStatus::Pending || i.status == OperationStatus::Running)
    {
        let same = |g: &Vec<OperationItem>| {
            g[0].instance_id == item.instance_id && g[0].target == item.target
        };
        match groups.iter_mut().find(|g| same(g)) {
            Some(group) => group.push(item),
            None => groups.push(vec![item]),
        }
    }
    let per_node = ctl.config.worker.items_per_node.max(1);
    let mut nodes: HashMap<String, Arc<Semaphore>> = HashMap::new();
    let runs = groups.into_iter().map(|group| {
        let node = group[0].node_name.clone().unwrap_or_default();
        let slots = nodes
            .entry(node)
            .or_insert_with(|| Arc::new(Semaphore::new(per_node)))
            .clone();
        async move {
            let _slot = slots.acquire_owned().await;
            for item in &group {
                if lost.load(Ordering::SeqCst) {
                    return Err(ActionError::Internal("lease lost to another worker".into()));
                }
                let outcome = run_step(ctl, op, item).await;
                Metrics::count(&ctl.metrics.operation_steps, outcome.label());
                if let Some(again) = record(ctl, item, outcome).await? {
                    return Ok(Some(again));
                }
            }
            Ok(None)
        }
    });
    let outcomes: Vec<Result<Option<DateTime<Utc>>, ActionError>> =
        futures_util::future::join_all(runs).await;
    let mut again: Option<DateTime<Utc>> = None;
    for outcome in outcomes {
        if let Some(at) = outcome? {
            again = Some(again.map_or(at, |a| a.min(at)));
        }
    }
    if let Some(at) = again {
        let w = worker.to_string();
        ctl.db(move |conn| Ok(Operation::release(conn, id, &w, at)?))
            .await?;
        return Ok(());
    }
    finish(ctl, id).await
}

/// Records one step's outcome on its item; `Some(time)` when the item must run again then.
async fn record(
    ctl: &Controller,
    item: &OperationItem,
    outcome: StepOutcome,
) -> Result<Option<DateTime<Utc>>, ActionError> {
    let item_id = item.id;
    let finish_as = |status: OperationStatus, why: Option<String>| {
        ctl.db(move |conn| {
            Ok(OperationItem::finish(
                conn,
                item_id,
                status,
                why.as_deref(),
            )?)
        })
    };
    match outcome {
        StepOutcome::Done => finish_as(OperationStatus::Success, None)
            .await
            .map(|_| None),
        StepOutcome::Cancelled(why) => finish_as(OperationStatus::Cancelled, Some(why))
            .await
            .map(|_| None),
        StepOutcome::Failed(why) => {
            fail_create(ctl, item, &why).await?;
            finish_as(OperationStatus::Failure, Some(why))
                .await
                .map(|_| None)
        }
        StepOutcome::Wait(delay) => Ok(Some(
            Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
        )),
        StepOutcome::Retry(why) => {
            let attempts = item.attempts as u32 + 1;
            if attempts >= ctl.config.worker.max_attempts {
                let why = format!("gave up after {attempts} attempts: {why}");
                fail_create(ctl, item, &why).await?;
                return finish_as(OperationStatus::Failure, Some(why))
                    .await
                    .map(|_| None);
            }
            let delay = backoff(ctl.config.worker.backoff_s, attempts);
            ctl.db(move |conn| Ok(OperationItem::note_error(conn, item_id, &why)?))
                .await?;
            Ok(Some(
                Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
            ))
        }
    }
}

/// A create item that failed for good leaves its instance visibly failed and frees what it
/// held (see [`crate::jobs::failed_create`]).
async fn fail_create(ctl: &Controller, item: &OperationItem, why: &str) -> Result<(), ActionError> {
    if item.action == StepKind::Create {
        crate::jobs::failed_create::release(ctl, item, why).await?;
    }
    Ok(())
}

/// Final status: failure when any item failed; cancelled when none failed but some were
/// cancelled (what was asked was not done, so it is no success); success only when every item
/// succeeded.
async fn finish(ctl: &Controller, id: uuid::Uuid) -> Result<(), ActionError> {
    ctl.db(move |conn| {
        let items = OperationItem::for_operation(conn, id)?;
        let (status, error) = roll_up(&items);
        Operation::finish(conn, id, status, error.as_deref())?;
        Ok(())
    })
    .await?;
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

/// An operation's status and error from its finished items.
pub fn roll_up(items: &[OperationItem]) -> (OperationStatus, Option<String>) {
    let with = |status: OperationStatus| items.iter().filter(|i| i.status == status).count();
    let (failed, cancelled) = (
        with(OperationStatus::Failure),
        with(OperationStatus::Cancelled),
    );
    let first_reason = |status: OperationStatus| {
        items
            .iter()
            .find(|i| i.status == status)
            .and_then(|i| i.error.as_deref().map(|e| format!(" ({}: {e})", i.target)))
            .unwrap_or_default()
    };
    if failed > 0 {
        let why = first_reason(OperationStatus::Failure);
        return (
            OperationStatus::Failure,
            Some(format!("{failed} of {} items failed{why}", items.len())),
        );
    }
    if cancelled > 0 {
        let why = first_reason(OperationStatus::Cancelled);
        return (
            OperationStatus::Cancelled,
            Some(format!(
                "{cancelled} of {} items were cancelled{why}",
                items.len()
            )),
        );
    }
    (OperationStatus::Success, None)
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
