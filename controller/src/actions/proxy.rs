//! Calls passed through to the agent holding an instance: exec, files and snapshots. The
//! caller's right to the instance is checked first; changes are audited.

use cohort_proto::api::instances::{CreateSnapshot, ExecRequest, ExecResult, Snapshot};
use serde_json::json;

use super::instances::{agent_of, audit_proxied};
use crate::agent_client::{AgentError, FileMeta};
use crate::auth::Caller;
use crate::controller::Controller;
use crate::error::{ActionError, ActionResult};
use crate::validate;

fn agent_error(node: String) -> impl FnOnce(AgentError) -> ActionError {
    move |source| ActionError::Agent { node, source }
}

pub async fn exec(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: ExecRequest,
) -> ActionResult<ExecResult> {
    if req.command.is_empty() {
        return Err(ActionError::invalid("command", "must not be empty"));
    }
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(ctl, &caller, "exec", &name, json!({"command": req.command})).await?;
    agent.exec(name, req).await.map_err(agent_error(node))
}

fn check_path(path: &str) -> ActionResult<()> {
    validate::text("path", path)?;
    if !path.starts_with('/') {
        return Err(ActionError::invalid("path", "must be absolute"));
    }
    Ok(())
}

pub async fn get_file(
    ctl: &Controller,
    caller: Caller,
    name: String,
    path: String,
) -> ActionResult<(Vec<u8>, FileMeta)> {
    check_path(&path)?;
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    agent.get_file(name, path).await.map_err(agent_error(node))
}

pub async fn put_file(
    ctl: &Controller,
    caller: Caller,
    name: String,
    path: String,
    body: Vec<u8>,
    meta: FileMeta,
) -> ActionResult<()> {
    check_path(&path)?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(ctl, &caller, "put_file", &name, json!({"path": path})).await?;
    agent
        .put_file(name, path, body, meta)
        .await
        .map_err(agent_error(node))
}

pub async fn snapshots(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<Snapshot>> {
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    agent.snapshots(name).await.map_err(agent_error(node))
}

pub async fn create_snapshot(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: CreateSnapshot,
) -> ActionResult<Snapshot> {
    validate::instance_name("name", &req.name)?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        "snapshot",
        &name,
        json!({"snapshot": req.name}),
    )
    .await?;
    agent
        .create_snapshot(name, req)
        .await
        .map_err(agent_error(node))
}

pub async fn restore_snapshot(
    ctl: &Controller,
    caller: Caller,
    name: String,
    snapshot: String,
) -> ActionResult<()> {
    validate::instance_name("snapshot", &snapshot)?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        "restore_snapshot",
        &name,
        json!({"snapshot": snapshot}),
    )
    .await?;
    agent
        .restore_snapshot(name, snapshot)
        .await
        .map_err(agent_error(node))
}

pub async fn delete_snapshot(
    ctl: &Controller,
    caller: Caller,
    name: String,
    snapshot: String,
) -> ActionResult<()> {
    validate::instance_name("snapshot", &snapshot)?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        "delete_snapshot",
        &name,
        json!({"snapshot": snapshot}),
    )
    .await?;
    agent
        .delete_snapshot(name, snapshot)
        .await
        .map_err(agent_error(node))
}
