//! The job worker: claims operations with `FOR UPDATE SKIP LOCKED` under a lease, runs their
//! items (each idempotent, the item id being the agent's idempotency key), retries
//! with backoff, and records progress so another worker can resume after a crash.
//!
//! Each claim carries a fencing token (see [`Claim`]). The lease is renewed under that token and
//! counted on this process's monotonic clock from the moment a renewal was sent: when it could
//! not be renewed for most of a lease (a database outage, a stalled pool), the claim is taken as
//! lost before the database would let another worker take it, the step in flight is dropped at
//! once, and nothing more is written for it: every record, hand-back and finish checks the token.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cohort_proto::api::operations::OperationStatus;
use tokio::sync::{watch, Semaphore};

use super::step::run_step;
use super::StepOutcome;
use crate::app::metrics::Metrics;
use crate::app::state::Controller;
use crate::db::models::operation::{Claim, Operation};
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
        // Waiting for a free slot while long operations run is progress too: tick meanwhile.
        let permit = loop {
            ctl.loops.tick(LOOP);
            match tokio::time::timeout(IDLE * 10, slots.clone().acquire_owned()).await {
                Ok(Ok(permit)) => break permit,
                Ok(Err(_)) => return,
                Err(_) => continue,
            }
        };
        let asked = Instant::now();
        match claim(&ctl, &worker).await {
            Ok(Some((op, claim))) => {
                let ctl = ctl.clone();
                tokio::spawn(async move {
                    if let Err(e) = process(&ctl, op, claim, asked).await {
                        tracing::warn!(operation = %claim.id, error = %e, "operation interrupted; its lease will expire");
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

/// The worker's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "worker";

fn lease(ctl: &Controller) -> Duration {
    Duration::from_secs(ctl.config.worker.lease_s.max(1))
}

fn chrono_span(span: Duration) -> chrono::Duration {
    chrono::Duration::from_std(span).unwrap_or(chrono::Duration::MAX)
}

async fn claim(ctl: &Controller, worker: &str) -> Result<Option<(Operation, Claim)>, ActionError> {
    let worker = worker.to_string();
    let lease = chrono_span(lease(ctl));
    ctl.db(move |conn| {
        let Some(op) = Operation::claim(conn, &worker, lease)? else {
            return Ok(None);
        };
        let claim = op
            .claim_of()
            .ok_or_else(|| ActionError::Internal("a claim came back without a token".into()))?;
        Ok(Some((op, claim)))
    })
    .await
}

/// What a run that lost its claim ends with.
fn lost(claim: Claim) -> ActionError {
    ActionError::Internal(format!(
        "the claim on operation {} was lost (its lease ran out or another claim took it); \
         this run stopped and wrote nothing more",
        claim.id
    ))
}

/// Keeps the lease alive while the operation runs; sends `true` on `lost` when the claim is no
/// longer safely held: the database says another claim has it, or no renewal went through for
/// four fifths of a lease (counted from when the last good one was sent, before the database
/// could have started its lease), so this run stops before another could start.
fn keep_lease(
    ctl: Arc<Controller>,
    claim: Claim,
    asked: Instant,
    lost: watch::Sender<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let lease = lease(&ctl);
        let safe = lease * 4 / 5;
        let every = lease / 3;
        let mut held_until = asked + safe;
        loop {
            tokio::time::sleep_until((Instant::now() + every).min(held_until).into()).await;
            if Instant::now() >= held_until {
                break;
            }
            let sent = Instant::now();
            let span = chrono_span(lease);
            let renewed = tokio::time::timeout_at(
                held_until.into(),
                ctl.db(move |conn| Ok(Operation::renew(conn, claim, span)?)),
            )
            .await;
            match renewed {
                Ok(Ok(true)) => held_until = sent + safe,
                Ok(Ok(false)) | Err(_) => break,
                Ok(Err(e)) => {
                    tracing::warn!(operation = %claim.id, error = %e, "renewing the lease failed; trying again");
                }
            }
        }
        tracing::warn!(operation = %claim.id, "the claim was lost; stopping its run");
        let _ = lost.send(true);
    })
}

/// Backoff before retry `attempt` (1-based): base * 2^(attempt-1), at most a minute.
pub fn backoff(base_s: u64, attempt: u32) -> Duration {
    let factor = 1u64 << attempt.saturating_sub(1).min(10);
    Duration::from_secs((base_s.max(1) * factor).min(60))
}

async fn process(
    ctl: &Arc<Controller>,
    op: Operation,
    claim: Claim,
    asked: Instant,
) -> Result<(), ActionError> {
    let (lost_tx, mut lost_rx) = watch::channel(false);
    let renewer = keep_lease(ctl.clone(), claim, asked, lost_tx);
    // Dropping `run_items` on loss drops the step in flight with it, at its next await.
    let result = tokio::select! {
        result = run_items(ctl, claim, &op) => result,
        _ = lost_rx.wait_for(|lost| *lost) => Err(lost(claim)),
    };
    renewer.abort();
    result
}

/// Runs the operation's unfinished items. Items of one instance run in order (a reset is a
/// delete then a create); different instances run at once, at most `items_per_node` on one node,
/// so a class of 60 is made in parallel rather than one container after another. When any item
/// must wait (queued, or a retry with backoff) the operation is handed back to run again at the
/// earliest such time; otherwise it is finished.
async fn run_items(ctl: &Controller, claim: Claim, op: &Operation) -> Result<(), ActionError> {
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
                let outcome = run_step(ctl, op, item).await;
                Metrics::count(&ctl.metrics.operation_steps, outcome.label());
                if let Some(again) = record(ctl, claim, item, outcome).await? {
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
        let after = (at - Utc::now()).max(chrono::Duration::zero());
        let released = ctl
            .db(move |conn| Ok(Operation::release(conn, claim, after)?))
            .await?;
        return if released { Ok(()) } else { Err(lost(claim)) };
    }
    finish(ctl, claim).await
}

/// Runs `work` in one transaction that first checks `claim` still holds its operation (and keeps
/// it share-locked, so no other claim can take it meanwhile); a lost claim writes nothing.
async fn fenced<T, F>(ctl: &Controller, claim: Claim, work: F) -> Result<T, ActionError>
where
    T: Send + 'static,
    F: FnOnce(&mut diesel::PgConnection) -> Result<T, ActionError> + Clone + Send + 'static,
{
    use diesel::Connection;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            if !Operation::holds(conn, claim)? {
                return Err(lost(claim));
            }
            work(conn)
        })
    })
    .await
}

/// Records one step's outcome on its item; `Some(time)` when the item must run again then.
async fn record(
    ctl: &Controller,
    claim: Claim,
    item: &OperationItem,
    outcome: StepOutcome,
) -> Result<Option<DateTime<Utc>>, ActionError> {
    let item_id = item.id;
    let finish_as = |status: OperationStatus, why: Option<String>| {
        fenced(ctl, claim, move |conn| {
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
            fail_create(ctl, claim, item, &why).await?;
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
                fail_create(ctl, claim, item, &why).await?;
                return finish_as(OperationStatus::Failure, Some(why))
                    .await
                    .map(|_| None);
            }
            let delay = backoff(ctl.config.worker.backoff_s, attempts);
            fenced(ctl, claim, move |conn| {
                Ok(OperationItem::note_error(conn, item_id, &why)?)
            })
            .await?;
            Ok(Some(
                Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
            ))
        }
    }
}

/// A create item that failed for good leaves its instance visibly failed and frees what it
/// held (see [`crate::jobs::failed_create`]).
async fn fail_create(
    ctl: &Controller,
    claim: Claim,
    item: &OperationItem,
    why: &str,
) -> Result<(), ActionError> {
    if item.action == StepKind::Create {
        fenced(ctl, claim, |_| Ok(())).await?;
        crate::jobs::failed_create::release(ctl, item, why).await?;
    }
    Ok(())
}

/// Final status: failure when any item failed; cancelled when none failed but some were
/// cancelled (what was asked was not done, so it is no success); success only when every item
/// succeeded.
async fn finish(ctl: &Controller, claim: Claim) -> Result<(), ActionError> {
    fenced(ctl, claim, move |conn| {
        let items = OperationItem::for_operation(conn, claim.id)?;
        let (status, error) = roll_up(&items);
        if !Operation::finish(conn, claim, status, error.as_deref())? {
            return Err(lost(claim));
        }
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
