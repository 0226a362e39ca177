//! `lxc network list` and `lxc storage list`, read-only: Cohort's fleet view, as LXD objects.
//! Each node has its own network (the bridge `cohort-agent` sets up for its containers) and its
//! own storage pool (root disks and homes), so each appears under the node's name, used by the
//! instances on that node that the caller sees; the pool shows the node's driver and space.
//! Networks and pools belong to the nodes' setup, not to the API: creating, changing or deleting
//! one is refused with LXD's error envelope and the reason.

use actix_web::web;
use cohort_proto::api::instances::Instance;
use cohort_proto::api::nodes::{Node, NodeState};
use serde_json::{json, Value};

use super::instances::{project_of, visible, Listing};
use super::reply::{sync, LxdError, LxdReply};
use super::{Ctl, LxdClient};
use crate::error::ActionError;
use crate::nodes::manage;

/// Why a network cannot be changed through `/1.0`.
const NETWORKS_ARE_THE_NODES: &str = "networks are each node's own, set up by cohort-agent \
     (its [network] settings); they are listed read-only";
/// Why a storage pool cannot be changed through `/1.0`.
const POOLS_ARE_THE_NODES: &str = "storage pools are each node's own, set up with the node \
     (cohort-agent's storage_pool); they are listed read-only";

fn status(node: &Node) -> &'static str {
    match node.state {
        NodeState::Offline => "Unavailable",
        _ => "Created",
    }
}

/// The URLs of the visible instances on a node, as LXD's `used_by` names them.
fn used_by(node: &Node, instances: &[Instance]) -> Vec<String> {
    instances
        .iter()
        .filter(|i| i.node.as_deref() == Some(node.name.as_str()))
        .map(|i| match project_of(i) {
            "default" => format!("/1.0/instances/{}", i.name),
            project => format!("/1.0/instances/{}?project={project}", i.name),
        })
        .collect()
}

/// `api.Network` of a node.
fn network(node: &Node, instances: &[Instance]) -> Value {
    json!({
        "name": node.name,
        "description": format!("The network of {}'s containers", node.name),
        "type": "bridge",
        "managed": true,
        "status": status(node),
        "config": {},
        "used_by": used_by(node, instances),
        "locations": [node.name],
        "project": "default",
    })
}

/// `api.StoragePool` of a node.
fn pool(node: &Node, instances: &[Instance]) -> Value {
    let gib = |bytes: u64| bytes / (1 << 30);
    json!({
        "name": node.name,
        "description": format!(
            "{}'s root disks and homes: {} GiB free of {} GiB",
            node.name,
            gib(node.disk_free_bytes),
            gib(node.disk_total_bytes)
        ),
        "driver": node.storage_driver.clone().unwrap_or_default(),
        "status": status(node),
        "config": {},
        "used_by": used_by(node, instances),
        "locations": [node.name],
    })
}

/// The nodes the caller may see with the instances it sees.
async fn fleet(ctl: &Ctl, client: LxdClient) -> Result<(Vec<Node>, Vec<Instance>), LxdError> {
    let nodes = manage::list(ctl, client.0.clone()).await?;
    let instances = visible(ctl, client.0).await?;
    Ok((nodes, instances))
}

/// A listing of one kind: URLs, or (recursion) the objects.
fn listing(
    req: &actix_web::HttpRequest,
    base: &str,
    nodes: &[Node],
    instances: &[Instance],
    object: fn(&Node, &[Instance]) -> Value,
) -> actix_web::HttpResponse {
    if Listing::of(req).recursion >= 1 {
        sync(
            nodes
                .iter()
                .map(|n| object(n, instances))
                .collect::<Vec<_>>(),
        )
    } else {
        sync(
            nodes
                .iter()
                .map(|n| format!("{base}/{}", n.name))
                .collect::<Vec<_>>(),
        )
    }
}

fn one(
    nodes: &[Node],
    instances: &[Instance],
    name: &str,
    what: &str,
    object: fn(&Node, &[Instance]) -> Value,
) -> LxdReply {
    nodes
        .iter()
        .find(|n| n.name == name)
        .map(|n| sync(object(n, instances)))
        .ok_or_else(|| ActionError::NotFound(what.into()).into())
}

pub async fn networks(ctl: Ctl, client: LxdClient, req: actix_web::HttpRequest) -> LxdReply {
    let (nodes, instances) = fleet(&ctl, client).await?;
    Ok(listing(&req, "/1.0/networks", &nodes, &instances, network))
}

pub async fn network_get(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let (nodes, instances) = fleet(&ctl, client).await?;
    one(&nodes, &instances, &name, "Network", network)
}

pub async fn pools(ctl: Ctl, client: LxdClient, req: actix_web::HttpRequest) -> LxdReply {
    let (nodes, instances) = fleet(&ctl, client).await?;
    Ok(listing(
        &req,
        "/1.0/storage-pools",
        &nodes,
        &instances,
        pool,
    ))
}

pub async fn pool_get(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let (nodes, instances) = fleet(&ctl, client).await?;
    one(&nodes, &instances, &name, "Storage pool", pool)
}

/// `GET /1.0/storage-pools/{name}/resources` (`lxc storage info`): the node's disk space.
pub async fn pool_resources(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let (nodes, _) = fleet(&ctl, client).await?;
    let node = nodes
        .iter()
        .find(|n| n.name == name.as_str())
        .ok_or_else(|| LxdError::from(ActionError::NotFound("Storage pool".into())))?;
    Ok(sync(json!({
        "space": {
            "used": node.disk_total_bytes.saturating_sub(node.disk_free_bytes),
            "total": node.disk_total_bytes,
        },
        "inodes": {"used": 0, "total": 0},
    })))
}

pub async fn network_change() -> LxdReply {
    Err(LxdError::not_supported(NETWORKS_ARE_THE_NODES))
}

pub async fn pool_change() -> LxdReply {
    Err(LxdError::not_supported(POOLS_ARE_THE_NODES))
}
