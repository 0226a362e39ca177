//! `POST /1.0/instances/{name}/exec` and `GET /1.0/operations/{id}/websocket`: `lxc exec` and
//! pylxd's `execute`, interactive or not. The caller's right to the instance is checked by the
//! same action as `POST /api/v1/instances/{name}/exec`; the node starts the command in LXD with
//! `wait-for-websocket`, and each websocket the client attaches (by the secret the operation
//! gave it, as with LXD) is relayed to the node's.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest};
use cohort_proto::agent::ExecSessionRequest;
use serde::Deserialize;
use uuid::Uuid;

use super::exec_sessions::{ExecSession, ExecSessions};
use super::instances::in_project;
use super::operations::accepted_as;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::error::ActionError;
use crate::instances::io;

/// `api.InstanceExecPost`; a field sent as `null` is its default, as in LXD.
#[derive(Debug, Deserialize)]
pub struct ExecPost {
    command: Vec<String>,
    #[serde(default, deserialize_with = "super::null_is_default")]
    environment: BTreeMap<String, String>,
    #[serde(
        default,
        rename = "wait-for-websocket",
        deserialize_with = "super::null_is_default"
    )]
    wait_for_websocket: bool,
    #[serde(
        default,
        rename = "record-output",
        deserialize_with = "super::null_is_default"
    )]
    record_output: bool,
    #[serde(default, deserialize_with = "super::null_is_default")]
    interactive: bool,
    #[serde(default, deserialize_with = "super::null_is_default")]
    width: i64,
    #[serde(default, deserialize_with = "super::null_is_default")]
    height: i64,
    #[serde(default, deserialize_with = "super::null_is_default")]
    user: u32,
    #[serde(default, deserialize_with = "super::null_is_default")]
    group: u32,
    #[serde(default, deserialize_with = "super::null_is_default")]
    cwd: String,
}

type Sessions = web::Data<ExecSessions>;

pub async fn exec(
    ctl: Ctl,
    sessions: Sessions,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
    body: web::Json<ExecPost>,
) -> LxdReply {
    let body = body.into_inner();
    let name = name.into_inner();
    if !body.wait_for_websocket || body.record_output {
        return Err(LxdError::not_supported(
            "exec without websockets (cohort exec returns the output whole)",
        ));
    }
    let size = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    let request = ExecSessionRequest {
        command: body.command.clone(),
        environment: body.environment,
        interactive: body.interactive,
        width: size(body.width),
        height: size(body.height),
        user: (body.user != 0).then_some(body.user),
        group: (body.group != 0).then_some(body.group),
        cwd: (!body.cwd.is_empty()).then_some(body.cwd),
    };
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    in_project(&ctl, client, name.clone(), &req).await?;
    let user_id = caller.user.id;
    let (node, agent, started) =
        io::start_exec_session(&ctl, caller, name.clone(), request).await?;
    let session = ExecSession::new(
        user_id,
        name,
        node,
        agent,
        started,
        body.command,
        body.interactive,
    );
    let session = sessions.into_inner().add(session).ok_or_else(|| {
        ActionError::conflict(None, "too many exec sessions are open; try again later")
    })?;
    Ok(accepted_as(
        &session.id.to_string(),
        session.lxd_operation(),
    ))
}

#[derive(Debug, Deserialize)]
pub struct SocketQuery {
    #[serde(default)]
    secret: String,
}

/// Attaches one of a session's websockets: the node's is opened first, so a refusal there is
/// an error answer rather than a websocket closed at once.
pub async fn websocket(
    sessions: Sessions,
    id: web::Path<String>,
    query: web::Query<SocketQuery>,
    req: HttpRequest,
    payload: web::Payload,
) -> LxdReply {
    let session = id
        .parse::<Uuid>()
        .ok()
        .and_then(|id| sessions.by_id(id))
        .ok_or_else(|| ActionError::NotFound("Operation".into()))?;
    let theirs = session
        .attach(&query.secret)
        .ok_or_else(|| ActionError::Forbidden("not a websocket secret of this operation".into()))?;
    let node_socket = session
        .agent
        .exec_session_socket(session.node_operation.clone(), theirs)
        .await
        .map_err(ActionError::on_node(session.node.clone()))?;
    let (response, client, incoming) =
        actix_ws::handle(&req, payload).map_err(|e| LxdError::BadRequest(e.to_string()))?;
    actix_web::rt::spawn(super::exec_relay::relay(client, incoming, node_socket));
    Ok(response)
}
