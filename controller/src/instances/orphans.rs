//! Orphans (admin): containers in a node's LXD project that Cohort has no record of, listed as
//! the poller recorded them, adopted as an instance of an owner, or deleted from their node.

use cohort_proto::api::instances::{DesiredState, ObservedState};
use cohort_proto::api::orphans::{AdoptOrphan, Orphan as WireOrphan};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::image::Image;
use crate::db::models::node::Node;
use crate::db::models::orphan::Orphan;
use crate::db::models::user::User;
use crate::db::schema::{instances, nodes};
use crate::error::{ActionError, ActionResult};

fn view(o: Orphan, node: String) -> WireOrphan {
    WireOrphan {
        node,
        name: o.name,
        status: o.status.to_string(),
        ssh_port: o.ssh_port.and_then(|p| u16::try_from(p).ok()),
        first_seen_at: o.first_seen_at,
        last_seen_at: o.last_seen_at,
    }
}

/// The orphan `name` on node `node`, its row locked, or a 404.
fn find(conn: &mut PgConnection, node: &str, name: &str) -> ActionResult<(Node, Orphan)> {
    let missing = || ActionError::NotFound(format!("orphan {name} on node {node}"));
    let node = Node::by_name(conn, node)?.ok_or_else(missing)?;
    let orphan = Orphan::lock(conn, node.id, name)?.ok_or_else(missing)?;
    Ok((node, orphan))
}

/// `GET /api/v1/orphans`.
pub async fn list(ctl: &Controller, caller: Caller) -> ActionResult<Vec<WireOrphan>> {
    caller.require(Role::Admin)?;
    ctl.db(|conn| {
        let names: std::collections::HashMap<i64, String> = nodes::table
            .select((nodes::id, nodes::name))
            .load(conn)?
            .into_iter()
            .collect();
        Ok(Orphan::list(conn)?
            .into_iter()
            .map(|o| {
                let node = names.get(&o.node_id).cloned().unwrap_or_default();
                view(o, node)
            })
            .collect())
    })
    .await
}

/// `DELETE /api/v1/orphans/{node}/{name}`: the container goes from its node, then the record
/// (and with it the port's reservation).
pub async fn delete(
    ctl: &Controller,
    caller: Caller,
    node: String,
    name: String,
) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    let (n, s) = (node.clone(), name.clone());
    let (found, _) = ctl.db(move |conn| find(conn, &n, &s)).await?;
    let (_, agent) = ctl.agent_by_node_id(found.id).await?;
    agent
        .delete_instance(name.clone())
        .await
        .map_err(ActionError::on_node(node.clone()))?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let (found, orphan) = find(conn, &node, &name)?;
            Orphan::delete(conn, found.id, &name)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::DeleteOrphan,
                AuditObject::Instance,
                &name,
                json!({"node": node, "ssh_port": orphan.ssh_port}),
            )?;
            Ok(())
        })
    })
    .await
}

/// `POST /api/v1/orphans/{node}/{name}/adopt`: the container becomes an instance of `owner`
/// on its node, with its port and the limits LXD holds for it; the poller then follows it like
/// any other.
pub async fn adopt(
    ctl: &Controller,
    caller: Caller,
    node: String,
    name: String,
    req: AdoptOrphan,
) -> ActionResult<()> {
    caller.require(Role::Admin)?;
    let (n, s) = (node.clone(), name.clone());
    let (found, _) = ctl.db(move |conn| find(conn, &n, &s)).await?;
    let (_, agent) = ctl.agent_by_node_id(found.id).await?;
    let live = agent
        .get_instance(name.clone())
        .await
        .map_err(ActionError::on_node(node.clone()))?;
    let limits = live.limits.ok_or_else(|| {
        ActionError::conflict(
            None,
            format!("LXD holds no limits for {name}; delete it instead"),
        )
    })?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let (found, orphan) = find(conn, &node, &name)?;
            let owner = User::by_username(conn, &req.owner)?
                .ok_or_else(|| ActionError::invalid("owner", format!("no user {}", req.owner)))?;
            let image = Image::lookup(conn, &req.image)?
                .ok_or_else(|| ActionError::invalid("image", format!("no image {}", req.image)))?;
            let port = orphan
                .ssh_port
                .filter(|p| (found.ssh_port_first..=found.ssh_port_last).contains(p));
            let state = match orphan.status {
                ObservedState::Running => DesiredState::Running,
                _ => DesiredState::Stopped,
            };
            // The orphan's port passes to the instance: no instance may take a port an orphan
            // still holds.
            Orphan::delete(conn, found.id, &name)?;
            diesel::insert_into(instances::table)
                .values((
                    instances::name.eq(&name),
                    instances::owner_id.eq(owner.id),
                    instances::image_id.eq(image.id),
                    instances::node_id.eq(found.id),
                    instances::ssh_port.eq(port),
                    instances::desired_state.eq(state),
                    instances::observed_state.eq(orphan.status),
                    instances::cpu.eq(limits.cpu as i32),
                    instances::memory_mib.eq(limits.memory_mib as i64),
                    instances::disk_gib.eq(limits.disk_gib as i64),
                ))
                .execute(conn)
                .map_err(|e| {
                    ActionError::from_unique_on(
                        e,
                        "instances_name_key",
                        "name",
                        "an instance with this name exists",
                    )
                })?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::AdoptOrphan,
                AuditObject::Instance,
                &name,
                json!({"node": node, "owner": req.owner, "image": req.image, "ssh_port": port}),
            )?;
            Ok(())
        })
    })
    .await
}
