//! Waiting a while for an operation a request recorded, where the request answers with its
//! effect (a course's network policy, a person's logins): the answer comes once the operation
//! is final or the wait is over, whichever is first. An operation still retrying then goes on
//! in the worker, and shows in `cohort operations` with its items' last errors; one that fails
//! fails with the reason, like any other.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use crate::app::state::Controller;
use crate::db::models::operation::Operation;
use crate::error::ActionResult;

/// How long a request waits for its operation.
pub const SETTLE: Duration = Duration::from_secs(10);

/// Waits until operation `id` is final or `within` has passed; the operation as it is then.
pub async fn settle(ctl: &Controller, id: Uuid, within: Duration) -> ActionResult<Operation> {
    let deadline = Instant::now() + within;
    loop {
        let op = ctl
            .db(move |conn| {
                Operation::find(conn, id)?.ok_or_else(|| {
                    crate::error::ActionError::Internal(format!("operation {id} is gone"))
                })
            })
            .await?;
        if op.status.is_final() || Instant::now() >= deadline {
            if op.status == cohort_proto::api::operations::OperationStatus::Failure {
                tracing::warn!(operation = %id, kind = %op.kind, error = ?op.error, "operation failed");
            }
            return Ok(op);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// [`settle`] for [`SETTLE`], when a request recorded an operation.
pub async fn settle_recorded(ctl: &Controller, op: Option<Uuid>) -> ActionResult<()> {
    if let Some(id) = op {
        settle(ctl, id, SETTLE).await?;
    }
    Ok(())
}
