//! `POST /1.0/instances/{name}` (`lxc move`, `lxc rename`) and `/1.0/instances/{name}/console`
//! (`lxc console`). A move between members of the cluster (`lxc move NAME --target NODE`) is
//! Cohort's move between nodes, for admins, as `cohort move` (a running instance is stopped,
//! moved and started again: never a live migration); a rename, or a move to another
//! server, is refused with the reason. The console log (`lxc console --show-log`) is LXD's own,
//! read through the node's agent; an interactive console is refused (`lxc exec` gives a shell).

use actix_web::{web, HttpRequest, HttpResponse};
use cohort_proto::api::instances::MoveInstance;
use serde::Deserialize;

use super::instances::in_project;
use super::operations::accepted;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::instances::{lxd_live, moves};

/// `api.InstancePost`, the fields Cohort reads.
#[derive(Debug, Deserialize)]
pub struct InstancePost {
    #[serde(default)]
    name: String,
    /// `lxc move --target` sets it (with `live` for a running instance: Cohort's move stops
    /// it, moves it and starts it on the new node, the same for either).
    #[serde(default)]
    migration: bool,
}

pub async fn post(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
    body: web::Json<InstancePost>,
) -> LxdReply {
    let name = name.into_inner();
    let target = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(k, _)| k == "target")
        .map(|(_, v)| v.into_owned())
        .filter(|t| !t.is_empty());
    let renamed = !body.name.is_empty() && body.name != name;
    if renamed {
        return Err(LxdError::not_supported(
            "renaming instances: the name is the instance's identity in Cohort (its home \
             volume, SSH endpoint, course roster and audit log follow it)",
        ));
    }
    // A migration source without a member to go to is `lxc copy` (the client copies through
    // a migration) or a move to another remote.
    let Some(target) = target.filter(|_| body.migration) else {
        return Err(LxdError::not_supported(
            "copying instances, or moving them to another server: Cohort makes instances from \
             images and moves them between its own nodes (lxc move NAME --target NODE)",
        ));
    };
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    in_project(&ctl, client, name.clone(), &req).await?;
    let op = moves::move_instance(&ctl, caller, name, MoveInstance { target }).await?;
    Ok(accepted(&op))
}

/// `GET /1.0/instances/{name}/console`: the console log, as LXD answers it (plain bytes).
pub async fn console_log(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
) -> LxdReply {
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    let instance = in_project(&ctl, client, name.into_inner(), &req).await?;
    let log = lxd_live::console_log(&ctl, caller, instance.name).await?;
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        .body(log))
}

/// `POST /1.0/instances/{name}/console`: an interactive console is not offered.
pub async fn console_attach() -> LxdReply {
    Err(LxdError::not_supported(
        "interactive consoles: use lxc exec NAME -- bash (or ssh); lxc console --show-log \
         shows the console log",
    ))
}

/// `DELETE /1.0/instances/{name}/console`: clearing the log is not offered.
pub async fn console_clear() -> LxdReply {
    Err(LxdError::not_supported(
        "clearing the console log: it is the node's, kept by its daemon",
    ))
}
