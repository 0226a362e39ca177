//! Changing instances: `PUT /1.0/instances/{name}/state` (start, stop, restart) and
//! `DELETE /1.0/instances/{name}`, each an operation of Cohort's, answered LXD's `async` way.

use actix_web::web;
use cohort_proto::api::instances::{InstanceStateChange, StateAction};
use serde::Deserialize;

use super::operations::accepted;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::error::ActionError;
use crate::instances::manage;

/// `api.InstanceStatePut`.
#[derive(Debug, Deserialize)]
pub struct StatePut {
    action: String,
    /// Seconds for a clean stop; -1 is LXD's "the default".
    #[serde(default)]
    timeout: i64,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    stateful: bool,
}

pub async fn put_state(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    body: web::Json<StatePut>,
) -> LxdReply {
    let action = match body.action.as_str() {
        "start" => StateAction::Start,
        "stop" => StateAction::Stop,
        "restart" => StateAction::Restart,
        "freeze" | "unfreeze" => return Err(LxdError::not_supported("freezing instances")),
        other => return Err(LxdError::BadRequest(format!("Unknown action {other}"))),
    };
    if body.stateful {
        return Err(LxdError::not_supported("stateful stop and start"));
    }
    let caller = caller_of(&ctl, client).await?;
    let change = InstanceStateChange {
        action,
        force: body.force,
        timeout_s: u32::try_from(body.timeout).ok().filter(|t| *t > 0),
    };
    let op = manage::change_state(&ctl, caller, name.into_inner(), change).await?;
    Ok(accepted(&op))
}

/// LXD refuses to delete a running instance, with a 400 (`lxc delete -f` stops it first, so no
/// force here); Cohort's action refuses it as a conflict on `force`.
pub async fn delete(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let caller = caller_of(&ctl, client).await?;
    match manage::delete(&ctl, caller, name.into_inner(), false).await {
        Ok(op) => Ok(accepted(&op)),
        Err(ActionError::Conflict { field, .. }) if field.as_deref() == Some("force") => Err(
            LxdError::BadRequest("The instance is currently running, stop it first".into()),
        ),
        Err(e) => Err(e.into()),
    }
}
