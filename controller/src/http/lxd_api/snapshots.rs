//! Snapshots as LXD serves them (`lxc snapshot`, `restore`, `delete NAME/SNAP`, `info`, and a
//! rename, pylxd's `snapshot.rename`): `/1.0/instances/{name}/snapshots[/{snap}]` and the restore of `PUT /1.0/instances/{name}`,
//! through the actions `/api/v1/instances/{name}/snapshots` uses. Cohort's snapshot actions
//! finish before they answer, so each change is answered as an operation already done.

use actix_web::{web, HttpRequest};
use cohort_proto::api::instances::{CreateSnapshot, Snapshot};
use serde::Deserialize;
use serde_json::{json, Value};

use super::instances::{in_project, Listing};
use super::operations::DoneOperations;
use super::reply::{sync, LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::accounts::auth::Caller;
use crate::error::ActionError;
use crate::instances::io;

/// `api.InstanceSnapshot`.
fn lxd_snapshot(s: &Snapshot) -> Value {
    json!({"name": s.name, "created_at": s.created_at, "stateful": s.stateful,
           "ephemeral": false, "architecture": "x86_64", "config": {}, "devices": {},
           "profiles": [], "expires_at": null, "size": -1})
}

/// The caller behind the client, once the instance is known to be in the asked project.
async fn checked(
    ctl: &Ctl,
    client: LxdClient,
    name: &str,
    req: &HttpRequest,
) -> Result<Caller, LxdError> {
    let caller = caller_of(ctl, LxdClient(client.0.clone())).await?;
    in_project(ctl, client, name.to_string(), req).await?;
    Ok(caller)
}

/// `GET /1.0/instances/{name}/snapshots`: the node's snapshots.
pub async fn list(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
) -> LxdReply {
    let name = name.into_inner();
    let caller = checked(&ctl, client, &name, &req).await?;
    let snapshots = io::snapshots(&ctl, caller, name.clone()).await?;
    Ok(if Listing::of(&req).recursion >= 1 {
        sync(snapshots.iter().map(lxd_snapshot).collect::<Vec<_>>())
    } else {
        sync(
            snapshots
                .iter()
                .map(|s| format!("/1.0/instances/{name}/snapshots/{}", s.name))
                .collect::<Vec<_>>(),
        )
    })
}

pub async fn get(
    ctl: Ctl,
    client: LxdClient,
    path: web::Path<(String, String)>,
    req: HttpRequest,
) -> LxdReply {
    let (name, snap) = path.into_inner();
    let caller = checked(&ctl, client, &name, &req).await?;
    let snapshots = io::snapshots(&ctl, caller, name).await?;
    let found = snapshots.iter().find(|s| s.name == snap);
    Ok(sync(lxd_snapshot(found.ok_or_else(|| {
        ActionError::NotFound("Snapshot".into())
    })?)))
}

/// `api.InstanceSnapshotsPost`.
#[derive(Debug, Deserialize)]
pub struct SnapshotsPost {
    name: String,
    #[serde(default)]
    stateful: bool,
}

pub async fn create(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
    body: web::Json<SnapshotsPost>,
) -> LxdReply {
    if body.stateful {
        return Err(LxdError::not_supported("stateful snapshots"));
    }
    if body.name.is_empty() {
        // LXD names it `snapN`; Cohort's action wants the name given.
        return Err(LxdError::BadRequest("Snapshot name is required".into()));
    }
    let name = name.into_inner();
    let caller = checked(&ctl, client, &name, &req).await?;
    let caller_id = caller.user.id;
    let request = CreateSnapshot {
        name: body.into_inner().name,
    };
    io::create_snapshot(&ctl, caller, name.clone(), request).await?;
    Ok(done.instance_changed(caller_id, "Snapshotting instance", &name))
}

/// `api.InstanceSnapshotPost`: a new name on the same instance. LXD moves a snapshot to another
/// server with `migration`; Cohort's instances move with their node's `cohort move`.
#[derive(Debug, Deserialize)]
pub struct SnapshotPost {
    name: String,
    #[serde(default)]
    migration: bool,
}

/// `POST /1.0/instances/{name}/snapshots/{snap}`: renames the snapshot.
pub async fn rename(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    path: web::Path<(String, String)>,
    req: HttpRequest,
    body: web::Json<SnapshotPost>,
) -> LxdReply {
    let body = body.into_inner();
    if body.migration {
        return Err(LxdError::not_supported(
            "migrating a snapshot (instances move between nodes with cohort move)",
        ));
    }
    if body.name.is_empty() {
        return Err(LxdError::BadRequest("Snapshot name is required".into()));
    }
    let (name, snap) = path.into_inner();
    let caller = checked(&ctl, client, &name, &req).await?;
    let caller_id = caller.user.id;
    let request = CreateSnapshot { name: body.name };
    io::rename_snapshot(&ctl, caller, name.clone(), snap, request).await?;
    Ok(done.instance_changed(caller_id, "Renaming snapshot", &name))
}

pub async fn delete(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    path: web::Path<(String, String)>,
    req: HttpRequest,
) -> LxdReply {
    let (name, snap) = path.into_inner();
    let caller = checked(&ctl, client, &name, &req).await?;
    let caller_id = caller.user.id;
    io::delete_snapshot(&ctl, caller, name.clone(), snap).await?;
    Ok(done.instance_changed(caller_id, "Deleting snapshot", &name))
}

/// `lxc restore NAME SNAP`, the `restore` of `PUT /1.0/instances/{name}`.
pub async fn restore(
    ctl: &Ctl,
    done: &DoneOperations,
    client: LxdClient,
    name: String,
    req: &HttpRequest,
    restore: String,
    stateful: bool,
) -> LxdReply {
    if stateful {
        return Err(LxdError::not_supported("stateful restores"));
    }
    // `lxc restore` names it `NAME/SNAP`; LXD takes a bare `SNAP` as well.
    let snap = match restore.split_once('/') {
        None => restore,
        Some((instance, snap)) if instance == name => snap.to_string(),
        Some(_) => {
            return Err(LxdError::BadRequest(
                "A snapshot of another instance cannot be restored".into(),
            ))
        }
    };
    let caller = checked(ctl, client, &name, req).await?;
    // LXD's 404 for a snapshot that is not there (the node's LXD fails the operation instead).
    let snapshots = io::snapshots(ctl, caller.clone(), name.clone()).await?;
    if !snapshots.iter().any(|s| s.name == snap) {
        return Err(ActionError::NotFound(format!("Snapshot {name}/{snap}")).into());
    }
    let caller_id = caller.user.id;
    io::restore_snapshot(ctl, caller, name.clone(), snap).await?;
    Ok(done.instance_changed(caller_id, "Restoring snapshot", &name))
}
