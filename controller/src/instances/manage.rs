//! Instances: creation (validated, placed or queued in the same transaction as the row), list,
//! get, state changes and deletion as operations, and the calls proxied to the node's agent.

use std::sync::Arc;

use cohort_proto::api::instances::{
    CreateInstance, GpuShare, Instance as WireInstance, InstancePage, InstanceStateChange, Limits,
    LiveConfig, StateAction, UpdateInstance,
};
use cohort_proto::api::instances::{DesiredState, ObservedState};
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::agent_client::NodeAgent;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::image::Image;
use crate::db::models::instance::{Instance, NewInstance};
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::node::Node;
use crate::db::models::user::User;
use crate::db::queries::page;
use crate::error::{ActionError, ActionResult};
use crate::instances::page_cache::{Page, PageKey};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::placement::{self, process_limit};
use crate::{validate, views};

/// Defaults when a request gives no limits: 1 core, 1024 MiB, 10 GiB.
pub const DEFAULT_LIMITS: Limits = Limits {
    cpu: 1,
    memory_mib: 1024,
    disk_gib: 10,
};

/// What a caller may ask for one instance: (cpu, memory MiB, disk GiB, GPUs). Students get a
/// small allowance; instructors a larger one; admins are bounded by the nodes only. The portal's
/// create form shows it.
pub fn allowance(role: Role) -> Option<(u32, u64, u64, u32)> {
    match role {
        Role::Student => Some((4, 8192, 50, 1)),
        Role::Instructor => Some((16, 65536, 500, 4)),
        Role::Admin => None,
    }
}

/// Most instances a student may own.
pub const STUDENT_MAX_INSTANCES: usize = 2;

fn check_limits(role: Role, limits: &Limits, gpus: u32) -> ActionResult<()> {
    if limits.cpu == 0 || limits.memory_mib == 0 || limits.disk_gib == 0 {
        return Err(ActionError::invalid(
            "limits",
            "cpu, memory_mib and disk_gib must be > 0",
        ));
    }
    if limits.cpu > 1024 || limits.memory_mib > 1 << 30 || limits.disk_gib > 1 << 20 || gpus > 64 {
        return Err(ActionError::invalid("limits", "limits are out of range"));
    }
    validate::memory_mib("limits.memory_mib", limits.memory_mib)?;
    if let Some((cpu, mem, disk, gpu)) = allowance(role) {
        for (field, asked, most) in [
            ("limits.cpu", u64::from(limits.cpu), u64::from(cpu)),
            ("limits.memory_mib", limits.memory_mib, mem),
            ("limits.disk_gib", limits.disk_gib, disk),
            ("gpus", u64::from(gpus), u64::from(gpu)),
        ] {
            if asked > most {
                return Err(ActionError::invalid(
                    field,
                    format!("{asked} is over your allowance of {most}"),
                ));
            }
        }
    }
    Ok(())
}

fn check_request(caller: &Caller, req: &CreateInstance) -> ActionResult<Limits> {
    validate::instance_name("name", &req.name)?;
    validate::text("image", &req.image)?;
    if let Some(model) = &req.gpu_model {
        validate::text("gpu_model", model)?;
    }
    validate::config("config", &req.config)?;
    let limits = req.limits.clone().unwrap_or(DEFAULT_LIMITS);
    check_limits(caller.role, &limits, req.gpus)?;
    if req.owner.as_ref().is_some_and(|o| o != caller.name()) {
        caller.require(Role::Instructor)?;
    }
    if req.node.is_some() {
        caller.require(Role::Admin)?;
    }
    if req.priority != 0 {
        caller.require(Role::Instructor)?;
    }
    Ok(limits)
}

/// Whether the caller may act on this instance: its owner, whoever teaches its course, or an
/// admin. Anyone else gets 403 (the instance exists; they may not touch it).
fn authorize(conn: &mut PgConnection, caller: &Caller, instance: &Instance) -> ActionResult<()> {
    if caller.is_admin() || instance.owner_id == caller.user.id {
        return Ok(());
    }
    if let Some(course) = instance.course_id {
        if crate::courses::course::teaches(conn, caller, course)? {
            return Ok(());
        }
    }
    Err(ActionError::Forbidden(format!(
        "instance {} is not yours",
        instance.name
    )))
}

pub(crate) fn find(conn: &mut PgConnection, caller: &Caller, name: &str) -> ActionResult<Instance> {
    let instance = Instance::by_name(conn, name)?
        .ok_or_else(|| ActionError::NotFound(format!("instance {name}")))?;
    authorize(conn, caller, &instance)?;
    Ok(instance)
}

/// Whom the caller may create an instance for: an admin anyone; an instructor themselves or a
/// student of a course they teach (an instance counts against its owner's allowance and lands
/// in their list, so no one else's); a student only themselves (see [`check_request`]).
fn check_owner(conn: &mut PgConnection, caller: &Caller, owner: &User) -> ActionResult<()> {
    if caller.is_admin() || owner.id == caller.user.id {
        return Ok(());
    }
    if caller.role == Role::Instructor && Enrollment::is_taught_by(conn, owner.id, caller.user.id)?
    {
        return Ok(());
    }
    Err(ActionError::Forbidden(format!(
        "{} is not a student of a course you teach",
        owner.username
    )))
}

/// One attempt of the create transaction.
fn create_tx(
    conn: &mut PgConnection,
    ctl_placement: &crate::app::config::PlacementConfig,
    caller: &Caller,
    req: &CreateInstance,
    limits: &Limits,
) -> ActionResult<WireOperation> {
    conn.transaction(|conn| {
        let owner = match &req.owner {
            Some(name) => User::by_username(conn, name)?
                .ok_or_else(|| ActionError::invalid("owner", format!("no user {name}")))?,
            None => caller.user.clone(),
        };
        check_owner(conn, caller, &owner)?;
        crate::courses::reserved::check_instance_name(conn, caller, &req.name)?;
        // The owner's row is locked first, so a student's concurrent creates count one after
        // another: without it each transaction saw the others' instances uncommitted and all
        // went through.
        // A student's allowance and cap are the owner's, whoever asks for it: an instructor
        // creating for a student gets no more than the student would (only an admin may).
        let student_owned = !caller.is_admin() && owner.role() == Role::Student;
        if student_owned {
            check_limits(Role::Student, limits, req.gpus)?;
            User::lock(conn, owner.id)?;
            if Instance::list(conn, Some(owner.id))?.len() >= STUDENT_MAX_INSTANCES {
                return Err(ActionError::conflict(
                    None,
                    format!(
                        "{} is a student, who may own at most {STUDENT_MAX_INSTANCES} instances",
                        owner.username
                    ),
                ));
            }
        }
        let image = Image::lookup(conn, &req.image)?
            .ok_or_else(|| ActionError::invalid("image", format!("no image {}", req.image)))?;
        crate::images::check_gpu_ready(&image, req.gpus, &req.image)?;
        let pinned = match &req.node {
            Some(name) => Some(
                Node::by_name(conn, name)?
                    .ok_or_else(|| ActionError::invalid("node", format!("no node {name}")))?
                    .id,
            ),
            None => None,
        };
        let new = NewInstance {
            name: &req.name,
            owner_id: owner.id,
            course_id: None,
            image_id: image.id,
            desired_state: if req.start {
                DesiredState::Running
            } else {
                DesiredState::Stopped
            },
            observed_state: ObservedState::Queued,
            cpu: limits.cpu as i32,
            memory_mib: limits.memory_mib as i64,
            disk_gib: limits.disk_gib as i64,
            gpu_count: req.gpus as i32,
            gpu_model: req.gpu_model.as_deref(),
            gpu_share: req.gpu_share,
            gpu_share_count: None,
            home_gib: 0,
            strategy: req.strategy,
            priority: req.priority,
            config: serde_json::to_value(&req.config).unwrap_or_default(),
        };
        let (instance_id, placed) =
            placement::insert(conn, &new, pinned, ctl_placement).map_err(|e| {
                ActionError::from_unique_on(
                    e,
                    "instances_name_key",
                    "name",
                    "an instance with this name exists",
                )
            })?;
        if placed.is_none() {
            let need = crate::placement::feasible::Need {
                cpu: new.cpu,
                memory_mib: new.memory_mib,
                disk_gib: new.disk_gib,
                gpus: new.gpu_count,
                gpu_model: new.gpu_model,
                exclusive: new.gpu_share == GpuShare::Exclusive,
            };
            crate::placement::feasible::check(
                conn,
                &need,
                pinned,
                ctl_placement,
                crate::placement::feasible::INSTANCE_FIELDS,
            )?;
        }
        if placed.is_none() && !req.queue {
            return Err(ActionError::NoCapacity(format!(
                "no node can hold {} now (cpu {}, memory {} MiB, disk {} GiB, {} GPUs{})",
                req.name,
                limits.cpu,
                limits.memory_mib,
                limits.disk_gib,
                req.gpus,
                req.gpu_model
                    .as_ref()
                    .map(|m| format!(" of model {m}"))
                    .unwrap_or_default()
            )));
        }
        let op = enqueue(
            conn,
            &payload::Job::CreateInstance(payload::Create::default()),
            Some(caller.user.id),
            &req.name,
            &[Step::new(StepKind::Create, &req.name, Some(instance_id))
                .placed(placed.as_ref().map(|p| (p.node_name.as_str(), p.ssh_port)))],
            Some(Audit {
                actor: caller.name(),
                action: AuditAction::Create,
                object_kind: AuditObject::Instance,
                object: &req.name,
                detail: json!({
                    "node": placed.as_ref().map(|p| &p.node_name),
                    "queued": placed.is_none(),
                }),
            }),
        )?;
        Ok(views::operation(conn, &op)?)
    })
}

fn is_retryable(e: &ActionError) -> bool {
    use diesel::result::{DatabaseErrorKind, Error};
    match e {
        ActionError::Database(Error::DatabaseError(DatabaseErrorKind::SerializationFailure, _)) => {
            true
        }
        ActionError::Database(Error::DatabaseError(_, info)) => info.message().contains("deadlock"),
        _ => false,
    }
}

/// `POST /api/v1/instances`.
pub async fn create(
    ctl: &Controller,
    caller: Caller,
    mut req: CreateInstance,
) -> ActionResult<WireOperation> {
    let limits = check_request(&caller, &req)?;
    crate::instances::snapshot_policy::apply(
        &caller,
        "config",
        &mut req.config,
        &[],
        &Default::default(),
    )?;
    // Outside a course: the default cap.
    let cap = ctl.config.placement.default_processes;
    process_limit::check(caller.is_admin(), &req.config, &[], cap)?;
    let placement_config = ctl.config.placement.clone();
    ctl.db(move |conn| {
        let mut attempt = 0;
        loop {
            match create_tx(conn, &placement_config, &caller, &req, &limits) {
                Err(e) if is_retryable(&e) && attempt < 5 => attempt += 1,
                other => return other,
            }
        }
    })
    .await
}

/// Most instances on one page of `GET /instances`, and the page size when none is asked for.
pub const MAX_PAGE: u32 = 1000;

/// `GET /api/v1/instances`: one page of the instances the caller may see, as JSON, and the
/// name the next page starts after. Served from the controller's [`PageCache`] while the
/// database holds what it showed.
///
/// [`PageCache`]: crate::instances::page_cache::PageCache
pub async fn list(ctl: &Controller, bearer: Bearer, page: InstancePage) -> ActionResult<Page> {
    let pages = ctl.pages.clone();
    ctl.db_as(bearer, move |conn, caller| {
        let limit = page.limit.unwrap_or(MAX_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ActionError::invalid(
                "limit",
                format!("a page holds 1 to {MAX_PAGE} instances"),
            ));
        }
        let key = PageKey::new(&caller, page.after.as_deref(), limit);
        pages.page(conn, key, |conn| {
            let (rows, next) = read_page(conn, &caller, page.after.as_deref(), limit)?;
            // Written into a buffer the size of the page (an instance is about 600 bytes of
            // JSON) rather than one grown and copied a dozen times from 128 bytes.
            let mut json = Vec::with_capacity(rows.len() * PAGE_BYTES_PER_INSTANCE + 2);
            serde_json::to_writer(&mut json, &rows)
                .map_err(|e| ActionError::Internal(e.to_string()))?;
            Ok(Page {
                json: json.into(),
                next,
            })
        })
    })
    .await
}

/// Room in a page's buffer for one instance, a little above a typical instance's JSON.
const PAGE_BYTES_PER_INSTANCE: usize = 768;

/// The page itself: up to `limit` instances the caller may see, by name after `after`, and the
/// last one's name when more follow.
fn read_page(
    conn: &mut PgConnection,
    caller: &Caller,
    after: Option<&str>,
    limit: u32,
) -> ActionResult<(Vec<WireInstance>, Option<String>)> {
    // The page and what each instance refers to, in one statement.
    let visible = match caller.role {
        Role::Admin => page::Visible::All,
        Role::Student => page::Visible::OwnedBy(caller.user.id),
        Role::Instructor => page::Visible::OwnedOrTaughtBy(caller.user.id),
    };
    let mut rows = page::instances(conn, visible, after, limit)?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = more
        .then(|| rows.last().map(|(i, _)| i.name.clone()))
        .flatten();
    Ok((views::instances_with_refs(conn, rows)?, next))
}

pub async fn get(ctl: &Controller, bearer: Bearer, name: String) -> ActionResult<WireInstance> {
    ctl.db_as(bearer, move |conn, caller| {
        let instance = find(conn, &caller, &name)?;
        Ok(views::instances(conn, vec![instance.into()])?.remove(0))
    })
    .await
}

/// `PUT /api/v1/instances/{name}/state`: records the desired state and starts an operation.
pub async fn change_state(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: InstanceStateChange,
) -> ActionResult<WireOperation> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            if instance.desired_state == DesiredState::Deleted {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is being deleted"),
                ));
            }
            let (desired, action) = match req.action {
                StateAction::Start => (DesiredState::Running, StepKind::Start),
                StateAction::Stop => (DesiredState::Stopped, StepKind::Stop),
                StateAction::Restart => (DesiredState::Running, StepKind::Restart),
            };
            Instance::set_desired(conn, instance.id, desired)?;
            if desired == DesiredState::Running {
                InstanceUsage::clear_stopped(conn, instance.id)?;
            }
            let op = enqueue(
                conn,
                &payload::Job::ChangeInstanceState(payload::ChangeState {
                    force: req.force,
                    timeout_s: req.timeout_s,
                    ..Default::default()
                }),
                Some(caller.user.id),
                &name,
                &[Step::new(action, &name, Some(instance.id))],
                Some(Audit {
                    actor: caller.name(),
                    action: action.into(),
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// `DELETE /api/v1/instances/{name}`: a running instance needs `force` (like `lxc delete -f`).
pub async fn delete(
    ctl: &Controller,
    caller: Caller,
    name: String,
    force: bool,
) -> ActionResult<WireOperation> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            if instance.observed_state == ObservedState::Running && !force {
                return Err(ActionError::conflict(
                    Some("force"),
                    format!("instance {name} is running: stop it first or delete with force"),
                ));
            }
            Instance::set_desired(conn, instance.id, DesiredState::Deleted)?;
            let op = enqueue(
                conn,
                &payload::Job::DeleteInstance(payload::Delete::default()),
                Some(caller.user.id),
                &name,
                &[Step::new(StepKind::Delete, &name, Some(instance.id))],
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Delete,
                    object_kind: AuditObject::Instance,
                    object: &name,
                    detail: json!({}),
                }),
            )?;
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// The agent holding an instance the caller may touch.
pub async fn agent_of(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<(String, Arc<dyn NodeAgent>)> {
    let node_id = ctl
        .db(move |conn| {
            let instance = find(conn, &caller, &name)?;
            instance.node_id.ok_or_else(|| {
                ActionError::conflict(
                    None,
                    format!("instance {name} is queued, not on a node yet"),
                )
            })
        })
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    Ok((node.name, agent))
}

/// Records a change made through a proxied call.
pub async fn audit_proxied(
    ctl: &Controller,
    caller: &Caller,
    action: AuditAction,
    name: &str,
    detail: serde_json::Value,
) -> ActionResult<()> {
    let (actor, name) = (caller.name().to_string(), name.to_string());
    ctl.db(move |conn| {
        Ok(audit::record(
            conn,
            &actor,
            action,
            AuditObject::Instance,
            &name,
            detail,
        )?)
    })
    .await
}

/// The shared device rules for a node: proxies may listen on loopback or its SSH address; no
/// host path holds this controller's state.
fn device_rules(ctl: &Controller, node: &Node, admin: bool) -> cohort_proto::validate::DeviceRules {
    cohort_proto::validate::DeviceRules {
        allow_host_path: admin,
        state_dirs: vec![ctl.config.server.state_dir.display().to_string()],
        listen_addresses: node
            .ssh_host
            .parse::<std::net::IpAddr>()
            .ok()
            .filter(|ip| !ip.is_unspecified())
            .into_iter()
            .collect(),
    }
}

/// Every key and device against the rules the agent applies too, before anything is sent.
fn check_update(
    ctl: &Controller,
    caller: &Caller,
    node: &Node,
    req: &UpdateInstance,
) -> ActionResult<()> {
    validate::config("config", &req.config)?;
    for key in &req.unset {
        cohort_proto::validate::config_key(key)
            .map_err(|e| ActionError::invalid(&format!("unset.{key}"), e.0))?;
    }
    if req.add_devices.is_empty() && req.remove_devices.is_empty() {
        if req.config.is_empty() && req.unset.is_empty() {
            return Err(ActionError::invalid("config", "nothing to change"));
        }
        return Ok(());
    }
    let rules = device_rules(ctl, node, caller.is_admin());
    for (name, dev) in &req.add_devices {
        cohort_proto::validate::device(name, dev, &rules)
            .map_err(|e| ActionError::invalid(&e.field, e.message))?;
    }
    for name in &req.remove_devices {
        if cohort_proto::validate::is_cohort_device(name) {
            return Err(ActionError::conflict(
                Some(&format!("remove_devices.{name}")),
                format!("device {name} is managed by Cohort (root disk, SSH proxy, home volume or an allocated GPU) and cannot be removed"),
            ));
        }
    }
    Ok(())
}

fn live(instance: cohort_proto::agent::Instance) -> LiveConfig {
    LiveConfig {
        config: instance.config,
        devices: instance.devices,
    }
}

/// The longest description kept, in characters (the column's check says the same).
pub const DESCRIPTION_MAX: usize = 1024;

/// A description LXD's clients may give: at most [`DESCRIPTION_MAX`] characters, no NUL.
pub fn check_description(description: &str) -> ActionResult<()> {
    if description.chars().count() > DESCRIPTION_MAX || description.contains('\0') {
        return Err(ActionError::invalid(
            "description",
            "must be at most 1024 characters, without NUL",
        ));
    }
    Ok(())
}

/// Sets instance `name`'s description, as `lxc` and pylxd keep one (empty: none); whoever may
/// change the instance may.
pub async fn describe(
    ctl: &Controller,
    caller: Caller,
    name: String,
    description: String,
) -> ActionResult<()> {
    check_description(&description)?;
    ctl.db(move |conn| {
        let instance = find(conn, &caller, &name)?;
        let description = Some(description.as_str()).filter(|d| !d.is_empty());
        Instance::set_description(conn, instance.id, description)?;
        Ok(())
    })
    .await
}

/// `PATCH /api/v1/instances/{name}`: live config keys and devices, applied by the node's agent
/// to LXD; the keys set are recorded on the row (so a re-create keeps them) and audited.
pub async fn update(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: UpdateInstance,
) -> ActionResult<LiveConfig> {
    if (!req.add_devices.is_empty() || !req.remove_devices.is_empty()) && !caller.is_admin() {
        return Err(ActionError::Forbidden(
            "only an admin may add or remove devices".into(),
        ));
    }
    let (instance, node_id) = {
        let (caller, name) = (caller.clone(), name.clone());
        ctl.db(move |conn| {
            let instance = find(conn, &caller, &name)?;
            let node_id = instance.node_id.ok_or_else(|| {
                ActionError::conflict(
                    None,
                    format!("instance {name} is queued, not on a node yet"),
                )
            })?;
            Ok((instance, node_id))
        })
        .await?
    };
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    check_update(ctl, &caller, &node, &req)?;
    let current = instance.config_map()?;
    let mut req = req;
    crate::instances::snapshot_policy::apply(
        &caller,
        "config",
        &mut req.config,
        &req.unset,
        &current,
    )?;
    let mut recorded = current.clone();
    for key in &req.unset {
        recorded.remove(key);
    }
    recorded.extend(req.config.clone());
    validate::config_size("config", &recorded)?;
    let (row, placement) = (instance.clone(), ctl.config.placement.clone());
    let cap = ctl
        .db(move |conn| Ok(process_limit::cap(conn, &row, &placement)?))
        .await?;
    process_limit::check(caller.is_admin(), &req.config, &req.unset, cap)?;
    let request = cohort_proto::agent::UpdateInstance {
        config: req.config.clone(),
        unset: req.unset.clone(),
        add_devices: req.add_devices.clone(),
        remove_devices: req.remove_devices.clone(),
        allow_host_path: caller.is_admin(),
    };
    let now = agent
        .update_instance(name.clone(), request)
        .await
        .map_err(ActionError::on_node(node.name.clone()))?;
    let (id, actor) = (instance.id, caller.name().to_string());
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            Instance::set_config(conn, id, json!(recorded))?;
            audit::record(
                conn,
                &actor,
                AuditAction::Update,
                AuditObject::Instance,
                &name,
                json!({
                    "set": req.config,
                    "unset": req.unset,
                    "add_devices": req.add_devices,
                    "remove_devices": req.remove_devices,
                }),
            )?;
            Ok(())
        })
    })
    .await?;
    Ok(live(now))
}

/// `GET /api/v1/instances/{name}/config`: config and devices as the node's LXD holds them.
pub async fn live_config(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<LiveConfig> {
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    let now = agent
        .get_instance(name)
        .await
        .map_err(ActionError::on_node(node))?;
    Ok(live(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_bounded_and_names_its_field() {
        assert!(check_description("").is_ok());
        assert!(check_description(&"é".repeat(DESCRIPTION_MAX)).is_ok());
        for bad in ["x".repeat(DESCRIPTION_MAX + 1), "a\0b".to_string()] {
            match check_description(&bad) {
                Err(ActionError::Invalid { field, .. }) => assert_eq!(field, "description"),
                other => panic!("{other:?} for {} characters", bad.chars().count()),
            }
        }
    }
}
