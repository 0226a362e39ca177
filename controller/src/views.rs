//! Wire types built from rows: the `/api/v1` answers in `cohort_proto::api`, never the models.

use std::collections::HashMap;

use cohort_proto::api::gpus as wire_gpus;
use cohort_proto::api::images as wire_images;
use cohort_proto::api::instances::{self as wire, InstanceGpu, Limits};
use cohort_proto::api::nodes::{self as wire_nodes};
use cohort_proto::api::operations::{self as wire_ops, OperationStatus, Progress};
use cohort_proto::api::users as wire_users;
use diesel::prelude::*;

use crate::db::models::gpu::Gpu;
use crate::db::models::gpu_allocation::{GpuAllocation, HeldGpu};
use crate::db::models::image::Image;
use crate::db::models::instance::{Instance, InstanceRefs, ShownInstance};
use crate::db::models::node::Node;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;

fn to_u16(port: Option<i32>) -> Option<u16> {
    port.and_then(|p| u16::try_from(p).ok())
}

pub fn user(u: &User) -> wire_users::User {
    wire_users::User {
        username: u.username.clone(),
        role: u.role(),
        full_name: u.full_name.clone(),
        email: u.email.clone(),
        created_at: u.created_at,
        disabled_at: u.disabled_at,
    }
}

pub fn ssh_key(k: &SshKey) -> wire_users::SshKey {
    wire_users::SshKey {
        id: k.id,
        fingerprint: k.fingerprint.clone(),
        public_key: k.public_key.clone(),
        created_at: k.created_at,
    }
}

pub fn nodes(conn: &mut PgConnection, rows: &[Node]) -> QueryResult<Vec<wire_nodes::Node>> {
    let gpu_counts = Gpu::count_by_node(conn)?;
    let expiries = crate::db::models::node_certificate::NodeCertificate::expiries(conn)?;
    let instance_counts = Instance::count_by_node(conn)?;
    Ok(rows
        .iter()
        .map(|n| {
            let count = |id: Option<i64>, list: &[(Option<i64>, i64)]| {
                list.iter().find(|(i, _)| *i == id).map_or(0, |(_, c)| *c) as u32
            };
            let gpus = gpu_counts
                .iter()
                .find(|(i, _)| *i == n.id)
                .map_or(0, |(_, c)| *c) as u32;
            wire_nodes::Node {
                name: n.name.clone(),
                agent_url: n.agent_url.clone(),
                ssh_host: n.ssh_host.clone(),
                ssh_port_first: n.ssh_port_first as u16,
                ssh_port_last: n.ssh_port_last as u16,
                state: n.state,
                cores: n.cores as u32,
                memory_bytes: n.memory_bytes as u64,
                disk_total_bytes: n.disk_total_bytes as u64,
                disk_free_bytes: n.disk_free_bytes as u64,
                daemon: n.daemon.clone(),
                lxd_version: n.lxd_version.clone(),
                storage_driver: n.storage_driver.clone(),
                nvidia_runtime: n.nvidia_runtime,
                gpus,
                instances: count(Some(n.id), &instance_counts),
                last_heartbeat_at: n.last_heartbeat_at,
                enrolled_at: n.enrolled_at,
                certificate_expires_at: expiries
                    .iter()
                    .find(|(name, _)| *name == n.name)
                    .map(|(_, at)| *at),
            }
        })
        .collect())
}

pub fn gpu(g: &Gpu, node: &str, allocated: i64) -> wire_gpus::Gpu {
    wire_gpus::Gpu {
        uuid: g.uuid.clone(),
        node: node.to_string(),
        index: g.idx as u32,
        model: g.model.clone(),
        memory_bytes: g.memory_bytes as u64,
        pci_address: g.pci_address.clone(),
        mig_parent: g.mig_parent.clone(),
        share_limit: g.share_limit as u32,
        allocated: allocated as u32,
        present: g.present,
    }
}

pub fn image(conn: &mut PgConnection, i: &Image) -> QueryResult<wire_images::Image> {
    Ok(wire_images::Image {
        fingerprint: i.fingerprint.clone(),
        alias: i.alias.clone(),
        description: i.description.clone(),
        gpu_ready: i.gpu_ready,
        size_bytes: i.size_bytes as u64,
        created_at: i.created_at,
        nodes: Image::node_names(conn, i.id)?,
        jupyter: i.jupyter,
    })
}

/// Instances with their owner, node, image, course, usage and GPUs: two queries whatever the
/// number of rows, one when none of them holds a GPU.
pub fn instances(
    conn: &mut PgConnection,
    rows: Vec<ShownInstance>,
) -> QueryResult<Vec<wire::Instance>> {
    let ids: Vec<i64> = rows.iter().map(|i| i.id).collect();
    let mut refs: HashMap<i64, InstanceRefs> = InstanceRefs::of_many(conn, &ids)?
        .into_iter()
        .map(|r| (r.instance_id, r))
        .collect();
    let rows = rows
        .into_iter()
        .map(|i| {
            let r = refs.remove(&i.id);
            (i, r)
        })
        .collect();
    with_gpus(conn, rows)
}

/// Instances read with what they refer to (as a page of `GET /instances` reads them), with
/// their GPUs: one query, none when no instance holds a GPU.
pub fn instances_with_refs(
    conn: &mut PgConnection,
    rows: Vec<(ShownInstance, InstanceRefs)>,
) -> QueryResult<Vec<wire::Instance>> {
    with_gpus(conn, rows.into_iter().map(|(i, r)| (i, Some(r))).collect())
}

fn with_gpus(
    conn: &mut PgConnection,
    rows: Vec<(ShownInstance, Option<InstanceRefs>)>,
) -> QueryResult<Vec<wire::Instance>> {
    let gpu_ids: Vec<i64> = rows
        .iter()
        .filter(|(i, _)| i.gpu_count > 0)
        .map(|(i, _)| i.id)
        .collect();
    let mut slots = if gpu_ids.is_empty() {
        HashMap::new()
    } else {
        GpuAllocation::held_by(conn, &gpu_ids)?
    };
    rows.into_iter()
        .map(|(i, refs)| {
            let gpus = slots.remove(&i.id).unwrap_or_default();
            instance(i, refs, gpus)
        })
        .collect()
}

/// One instance on the wire from its row, what it refers to (missing only when it was deleted
/// since its row was read) and its GPUs; a row whose config cannot be read is an error.
fn instance(
    i: ShownInstance,
    refs: Option<InstanceRefs>,
    gpus: Vec<HeldGpu>,
) -> QueryResult<wire::Instance> {
    let config = i.config_map()?;
    let InstanceRefs {
        owner,
        image,
        node,
        ssh_host,
        course,
        usage,
        ..
    } = refs.unwrap_or_default();
    let used = usage.as_ref();
    Ok(wire::Instance {
        name: i.name,
        owner,
        course,
        node,
        image,
        desired_state: i.desired_state,
        observed_state: i.observed_state,
        limits: Limits {
            cpu: i.cpu as u32,
            memory_mib: i.memory_mib as u64,
            disk_gib: i.disk_gib as u64,
        },
        gpus: gpus
            .into_iter()
            .map(|g| InstanceGpu {
                uuid: g.uuid,
                model: g.model,
                slot: g.slot as u32,
            })
            .collect(),
        ssh_host,
        ssh_port: to_u16(i.ssh_port),
        ssh_host_key: i.ssh_host_key,
        priority: i.priority,
        config,
        error: i.error,
        created_at: i.created_at,
        last_seen_at: i.last_seen_at,
        gpu_usage: used.map(|u| gpu_usage(&u.gpus)).unwrap_or_default(),
        gpu_active_at: used.and_then(|u| u.gpu_active_at),
        stop_reason: used.and_then(|u| u.stop_reason.clone()),
        stopped_at: used.and_then(|u| u.stopped_at),
        gpu_detach_reason: used.and_then(|u| u.detach_reason.clone()),
        gpus_detached_at: used.and_then(|u| u.gpus_detached_at),
        description: i.description,
    })
}

pub fn operation(conn: &mut PgConnection, op: &Operation) -> QueryResult<wire_ops::Operation> {
    let items = OperationItem::for_operation(conn, op.id)?;
    let created_by = match op.created_by {
        Some(id) => User::find(conn, id)?.username,
        None => String::new(),
    };
    let done = items
        .iter()
        .filter(|i| i.status == OperationStatus::Success)
        .count() as u32;
    let failed = items
        .iter()
        .filter(|i| i.status == OperationStatus::Failure)
        .count() as u32;
    Ok(wire_ops::Operation {
        id: op.id,
        kind: op.kind,
        status: op.status,
        created_by,
        target: op.target.clone(),
        progress: Progress {
            total: items.len() as u32,
            done,
            failed,
        },
        items: items
            .iter()
            .map(|i| wire_ops::OperationItem {
                id: i.id,
                target: i.target.clone(),
                node: i.node_name.clone(),
                ssh_port: to_u16(i.ssh_port),
                status: i.status,
                attempts: i.attempts as u32,
                error: i.error.clone(),
            })
            .collect(),
        error: op.error.clone(),
        created_at: op.created_at,
        updated_at: op.updated_at,
    })
}

/// `instance_usage.gpus` (`{uuid: {processes, memory_used_bytes, memory_share}}`) on the wire.
fn gpu_usage(gpus: &serde_json::Value) -> Vec<wire::InstanceGpuUsage> {
    let Some(map) = gpus.as_object() else {
        return Vec::new();
    };
    map.iter()
        .map(|(uuid, u)| wire::InstanceGpuUsage {
            gpu: uuid.clone(),
            processes: u["processes"].as_u64().unwrap_or(0) as u32,
            memory_used_bytes: u["memory_used_bytes"].as_u64().unwrap_or(0),
            memory_share: u["memory_share"].as_f64().unwrap_or(0.0),
        })
        .collect()
}
