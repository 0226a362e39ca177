//! Calls passed through to the agent holding an instance: exec, files and snapshots. The
//! caller's right to the instance is checked first; changes are audited.

use std::sync::Arc;

use cohort_proto::agent::{ExecSession, ExecSessionRequest};
use cohort_proto::api::instances::{CreateSnapshot, ExecRequest, Snapshot};
use serde_json::json;

use super::manage::{agent_of, audit_proxied};
use crate::accounts::auth::Caller;
use crate::agent_client::{AgentError, AgentStream, FileDownload, FileMeta, NodeAgent};
use crate::app::state::Controller;
use crate::db::enums::AuditAction;
use crate::error::{ActionError, ActionResult};
use crate::validate;

/// Relays `body`, failing once more than `limit` bytes came (the agent checks its own side; a
/// relay never grows past the limit whatever it is sent).
fn bounded(body: AgentStream, limit: u64) -> AgentStream {
    use futures_util::StreamExt;
    Box::pin(body.scan(0u64, move |seen, chunk| {
        let chunk = chunk.and_then(|c| {
            *seen += c.len() as u64;
            if *seen > limit {
                Err(AgentError::Decode(format!(
                    "answer larger than {limit} bytes"
                )))
            } else {
                Ok(c)
            }
        });
        std::future::ready(Some(chunk))
    }))
}

/// `POST /instances/{name}/exec`: the result (the JSON of `ExecResult`) streams back as the
/// agent reads the output, at most `limits.exec_output_mib` of it.
pub async fn exec(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: ExecRequest,
) -> ActionResult<AgentStream> {
    cohort_proto::validate::exec_request(&req.command, &req.environment, req.cwd.as_deref())
        .map_err(|e| ActionError::invalid(&e.field, e.message))?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        AuditAction::Exec,
        &name,
        json!({"command": req.command}),
    )
    .await?;
    let limit = ctl.config.limits.exec_output_bytes();
    let body = agent
        .exec_stream(name, req, limit)
        .await
        .map_err(ActionError::on_node(node))?;
    // Base64 makes four bytes of three, and the JSON around it is short.
    Ok(bounded(body, limit / 3 * 4 + 1024))
}

/// An exec whose streams the caller attaches to (the LXD-style API's websockets): the same
/// right to the instance as [`exec`], audited the same way; answers the node, its agent (for
/// attaching and waiting) and the session the agent started.
pub async fn start_exec_session(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: ExecSessionRequest,
) -> ActionResult<(String, Arc<dyn NodeAgent>, ExecSession)> {
    cohort_proto::validate::exec_request(&req.command, &req.environment, req.cwd.as_deref())
        .map_err(|e| ActionError::invalid(&e.field, e.message))?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        AuditAction::Exec,
        &name,
        json!({"command": req.command, "interactive": req.interactive}),
    )
    .await?;
    let session = agent
        .start_exec_session(name, req)
        .await
        .map_err(ActionError::on_node(node.clone()))?;
    Ok((node, agent, session))
}

fn check_path(path: &str) -> ActionResult<()> {
    validate::text("path", path)?;
    if !path.starts_with('/') {
        return Err(ActionError::invalid("path", "must be absolute"));
    }
    Ok(())
}

/// `GET /instances/{name}/files`: the file streams through, at most `limits.file_mib` of it.
pub async fn get_file(
    ctl: &Controller,
    caller: Caller,
    name: String,
    path: String,
) -> ActionResult<FileDownload> {
    check_path(&path)?;
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    let limit = ctl.config.limits.file_bytes() as u64;
    let file = agent
        .get_file(name, path, limit)
        .await
        .map_err(ActionError::on_node(node))?;
    if file.length.is_some_and(|l| l > limit) {
        return Err(ActionError::TooLarge {
            field: "path".into(),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        });
    }
    Ok(FileDownload {
        body: bounded(file.body, limit),
        ..file
    })
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
    audit_proxied(
        ctl,
        &caller,
        AuditAction::PutFile,
        &name,
        json!({"path": path}),
    )
    .await?;
    agent
        .put_file(name, path, body, meta)
        .await
        .map_err(ActionError::on_node(node))
}

pub async fn snapshots(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<Snapshot>> {
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    agent
        .snapshots(name)
        .await
        .map_err(ActionError::on_node(node))
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
        AuditAction::Snapshot,
        &name,
        json!({"snapshot": req.name}),
    )
    .await?;
    agent
        .create_snapshot(name, req)
        .await
        .map_err(ActionError::on_node(node))
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
        AuditAction::RestoreSnapshot,
        &name,
        json!({"snapshot": snapshot}),
    )
    .await?;
    agent
        .restore_snapshot(name, snapshot)
        .await
        .map_err(ActionError::on_node(node))
}

/// Gives a snapshot another name (`lxc`'s and pylxd's rename, `POST` to the snapshot).
pub async fn rename_snapshot(
    ctl: &Controller,
    caller: Caller,
    name: String,
    snapshot: String,
    req: CreateSnapshot,
) -> ActionResult<Snapshot> {
    validate::instance_name("snapshot", &snapshot)?;
    validate::instance_name("name", &req.name)?;
    let (node, agent) = agent_of(ctl, caller.clone(), name.clone()).await?;
    audit_proxied(
        ctl,
        &caller,
        AuditAction::RenameSnapshot,
        &name,
        json!({"snapshot": snapshot, "to": req.name}),
    )
    .await?;
    agent
        .rename_snapshot(name, snapshot, req)
        .await
        .map_err(ActionError::on_node(node))
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
        AuditAction::DeleteSnapshot,
        &name,
        json!({"snapshot": snapshot}),
    )
    .await?;
    agent
        .delete_snapshot(name, snapshot)
        .await
        .map_err(ActionError::on_node(node))
}
