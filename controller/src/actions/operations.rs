//! Operations: starting them (in the caller's transaction), reading and waiting on them.

use std::time::Duration;

use cohort_proto::api::operations::{Operation as WireOperation, OperationKind};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use uuid::Uuid;

use crate::auth::{Bearer, Caller};
use crate::controller::Controller;
use crate::error::{ActionError, ActionResult};
use crate::models::operation::Operation;
use crate::models::operation_item::OperationItem;
use crate::views;

/// One step to record: (action, target, instance id).
pub struct Step<'a> {
    pub action: &'a str,
    pub target: &'a str,
    pub instance_id: Option<i64>,
}

/// Records an operation and its items; the worker picks it up once the transaction commits.
pub fn start(
    conn: &mut PgConnection,
    kind: OperationKind,
    created_by: Option<i64>,
    target: &str,
    payload: serde_json::Value,
    steps: &[Step<'_>],
) -> QueryResult<Operation> {
    let op = Operation::insert(conn, views::kind_name(kind), created_by, target, payload)?;
    for (position, step) in steps.iter().enumerate() {
        OperationItem::insert(
            conn,
            op.id,
            position as i32,
            step.action,
            step.target,
            step.instance_id,
        )?;
    }
    Ok(op)
}

/// Records on each item of `op`, in order, the node it leaves (a move's source): the worker
/// runs items of different nodes at once, and a move resumed after its commit finds there the
/// copies it still has to delete.
pub fn record_sources(conn: &mut PgConnection, op: Uuid, sources: &[&str]) -> QueryResult<()> {
    for (item, source) in OperationItem::for_operation(conn, op)?.iter().zip(sources) {
        OperationItem::set_node(conn, item.id, source)?;
    }
    Ok(())
}

fn visible(conn: &mut PgConnection, caller: &Caller, id: Uuid) -> ActionResult<WireOperation> {
    let op = Operation::find(conn, id)?
        .filter(|op| caller.role == Role::Admin || op.created_by == Some(caller.user.id))
        .ok_or_else(|| ActionError::NotFound(format!("operation {id}")))?;
    Ok(views::operation(conn, &op)?)
}

pub async fn get(ctl: &Controller, caller: Caller, id: Uuid) -> ActionResult<WireOperation> {
    ctl.db(move |conn| visible(conn, &caller, id)).await
}

pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireOperation>> {
    ctl.db_as(bearer, |conn, caller| {
        let owner = (!caller.is_admin()).then_some(caller.user.id);
        Operation::list(conn, owner)?
            .iter()
            .map(|op| Ok(views::operation(conn, op)?))
            .collect()
    })
    .await
}

/// Longest and default wait.
const MAX_WAIT_S: u32 = 300;
const DEFAULT_WAIT_S: u32 = 30;

/// Answers once the operation is final or `timeout` seconds have passed. Polls the database, so
/// it sees operations finished by any controller process.
pub async fn wait(
    ctl: &Controller,
    caller: Caller,
    id: Uuid,
    timeout: Option<u32>,
) -> ActionResult<WireOperation> {
    let timeout = timeout.unwrap_or(DEFAULT_WAIT_S);
    if timeout > MAX_WAIT_S {
        return Err(ActionError::invalid(
            "timeout",
            format!("at most {MAX_WAIT_S} seconds"),
        ));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(u64::from(timeout));
    loop {
        let c = caller.clone();
        let op = ctl.db(move |conn| visible(conn, &c, id)).await?;
        if op.status.is_final() || tokio::time::Instant::now() >= deadline {
            return Ok(op);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
