//! A course container's home volume seen from its instance: the snapshots its daemon made of
//! it (`GET /instances/{name}/home/snapshots`, a read passed through to the agent) and a
//! restore from one (`POST /instances/{name}/home/restore`, an operation: it stops and starts
//! the container, so it is durable and retried as any node change), or of one path of it into
//! `~/restored/` (an operation too, the container left running; the agent is asked first
//! whether the path can be, so a bad one is a 4xx at once). For the student, their
//! course's staff and admins, as the instance's other routes are; anyone else gets a 403.

use cohort_proto::agent::{HomeSnapshot, RestoreHomePath};
use cohort_proto::api::instances::RestoreHomeRequest;
use cohort_proto::api::operations::Operation as WireOperation;
use diesel::Connection;
use serde_json::json;

use crate::db::enums::{AuditAction, AuditObject};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};

use super::manage::find;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::{ActionError, ActionResult};
use crate::placement::home_size::home_volume;
use crate::{validate, views};

/// The node of instance `name`, which the caller may see and which has a home volume (404 for
/// one that is not a course's, 409 while it is queued).
async fn node_of(ctl: &Controller, caller: Caller, name: String) -> ActionResult<i64> {
    ctl.db(move |conn| {
        let instance = find(conn, &caller, &name)?;
        if instance.course_id.is_none() {
            return Err(ActionError::NotFound(format!(
                "instance {name} has no home volume (it is not a course's)"
            )));
        }
        instance.node_id.ok_or_else(|| {
            ActionError::conflict(
                None,
                format!("instance {name} is queued, not on a node yet"),
            )
        })
    })
    .await
}

/// The home's snapshots, oldest first. 404 for an instance with no home volume (not a course's).
pub async fn snapshots(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Vec<HomeSnapshot>> {
    let node_id = node_of(ctl, caller, name.clone()).await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    agent
        .home_snapshots(home_volume(&name))
        .await
        .map_err(ActionError::on_node(node.name))
}

/// Restores the home of instance `name` from `req.snapshot`, whole, as an operation with one
/// `restore_home` item (audited `restore_home`). 400 at `snapshot` for a name that cannot be one.
pub async fn restore(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: RestoreHomeRequest,
) -> ActionResult<WireOperation> {
    validate::instance_name("snapshot", &req.snapshot)?;
    if let Some(path) = req.path.clone() {
        return restore_path(ctl, caller, name, req.snapshot, path).await;
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            if instance.course_id.is_none() {
                return Err(ActionError::NotFound(format!(
                    "instance {name} has no home volume (it is not a course's)"
                )));
            }
            let op = enqueue(
                conn,
                &payload::Job::RestoreHome(payload::RestoreHome {
                    snapshot: req.snapshot.clone(),
                }),
                Some(caller.user.id),
                &name,
                &[Step::new(StepKind::RestoreHome, &name, Some(instance.id))],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::RestoreHome,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({ "snapshot": req.snapshot }),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// Copies `path` of the home's `snapshot` into `~/restored/<snapshot>/<path>`, as an operation
/// with one `restore_home_path` item (audited `restore_home_path`). The path is checked first,
/// here (400 at `path` when absolute or holding `..`) and by the node (a path through a link in
/// the snapshot, or absent from it, a 4xx at `path`; an absent snapshot at `snapshot`), so
/// nothing is enqueued for what cannot be done.
async fn restore_path(
    ctl: &Controller,
    caller: Caller,
    name: String,
    snapshot: String,
    path: String,
) -> ActionResult<WireOperation> {
    cohort_proto::validate::home_relative_path(&path)
        .map_err(|e| ActionError::invalid("path", e.0))?;
    let path = path.trim_end_matches('/').to_string();
    let node_id = node_of(ctl, caller.clone(), name.clone()).await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    let check = RestoreHomePath {
        volume: home_volume(&name),
        snapshot: snapshot.clone(),
        path: path.clone(),
        check: true,
    };
    agent
        .check_home_path(name.clone(), check)
        .await
        .map_err(ActionError::on_node(node.name))?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            let op = enqueue(
                conn,
                &payload::Job::RestoreHomePath(payload::RestoreHomePath {
                    snapshot: snapshot.clone(),
                    path: path.clone(),
                }),
                Some(caller.user.id),
                &name,
                &[Step::new(
                    StepKind::RestoreHomePath,
                    &name,
                    Some(instance.id),
                )],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::RestoreHomePath,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({ "snapshot": snapshot, "path": path }),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}
