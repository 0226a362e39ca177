//! Operations: reading and waiting on them (they are recorded by [`crate::jobs::enqueue`]).

use std::time::Duration;

use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use uuid::Uuid;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::models::operation::Operation;
use crate::error::{ActionError, ActionResult};
use crate::views;

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
pub const MAX_WAIT_S: u32 = 300;
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
