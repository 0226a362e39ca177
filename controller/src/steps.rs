//! The steps operations are made of. Each is idempotent: it looks at the database and the
//! agent and does only what is missing, and the agent dedupes creates by the item id.

use std::time::Duration;

use cohort_proto::agent::{
    AttachGpus, CreateInstance, GpuAttachment, ImportImage, InstanceSource, Limits,
    PublishInstance, SshAccess, StateAction, StateChange,
};
use cohort_proto::api::operations::OperationKind;
use diesel::prelude::*;

use crate::agent_client::{AgentError, NodeAgent};
use crate::controller::Controller;
use crate::error::ActionError;
use crate::gpu_slots;
use crate::models::audit;
use crate::models::course_network::CourseNetwork;
use crate::models::gpu::Gpu;
use crate::models::gpu_allocation::GpuAllocation;
use crate::models::image::{Image, NewImage};
use crate::models::instance::Instance;
use crate::models::instance_usage::InstanceUsage;
use crate::models::node::Node;
use crate::models::operation::Operation;
use crate::models::operation_item::OperationItem;
use crate::models::ssh_key::SshKey;
use crate::models::user::User;
use crate::{homes, processes};

/// What became of one step.
#[derive(Debug)]
pub enum StepOutcome {
    Done,
    /// Nothing to do any more (the instance went away).
    Cancelled(String),
    /// Permanent failure: retrying cannot help.
    Failed(String),
    /// A transient failure: retry later with backoff.
    Retry(String),
    /// Not runnable yet (the instance waits in the queue); look again after the delay.
    Wait(Duration),
}

impl StepOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            StepOutcome::Done => "done",
            StepOutcome::Cancelled(_) => "cancelled",
            StepOutcome::Failed(_) => "failed",
            StepOutcome::Retry(_) => "retry",
            StepOutcome::Wait(_) => "wait",
        }
    }
}

impl From<ActionError> for StepOutcome {
    fn from(e: ActionError) -> Self {
        match &e {
            ActionError::Agent { source, .. } if source.is_permanent() => {
                StepOutcome::Failed(e.to_string())
            }
            _ => StepOutcome::Retry(e.to_string()),
        }
    }
}

/// Runs one item of `op`.
pub async fn run_step(ctl: &Controller, op: &Operation, item: &OperationItem) -> StepOutcome {
    match step(ctl, op, item).await {
        Ok(outcome) => outcome,
        Err(e) => e.into(),
    }
}

async fn step(
    ctl: &Controller,
    op: &Operation,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    // A delete whose instance is gone has nothing left to do (an earlier attempt, or another
    // delete, removed it); any other step on a gone instance was asked for and not done.
    if item.action == crate::actions::image_distribution::STEP {
        return crate::actions::image_distribution::import_step(ctl, op, item).await;
    }
    let gone = || {
        if item.action == "delete" {
            StepOutcome::Done
        } else {
            StepOutcome::Cancelled("its instance is gone".into())
        }
    };
    let Some(instance_id) = item.instance_id else {
        return Ok(gone());
    };
    let instance = ctl
        .db(move |conn| Ok(Instance::find(conn, instance_id).optional()?))
        .await?;
    let Some(instance) = instance else {
        return Ok(gone());
    };
    if item.action == "delete" {
        return delete(ctl, op, item, instance).await;
    }
    if instance.desired_state == "deleted" {
        return Ok(StepOutcome::Cancelled(
            "the instance is being deleted".into(),
        ));
    }
    if instance.node_id.is_none() && instance.observed_state == "error" {
        return Ok(StepOutcome::Failed(format!(
            "the instance failed to be created: {}",
            instance.error.as_deref().unwrap_or("no reason recorded")
        )));
    }
    let Some(node_id) = instance.node_id else {
        // Queued: the item shows why (the queue keeps the reason on the instance).
        if let Some(why) = instance
            .error
            .clone()
            .filter(|e| *e != item.error.as_deref().unwrap_or(""))
        {
            let item_id = item.id;
            ctl.db(move |conn| Ok(OperationItem::note_error(conn, item_id, &why)?))
                .await?;
        }
        return Ok(StepOutcome::Wait(Duration::from_secs(
            ctl.config.placement.queue_interval_s.max(1),
        )));
    };
    let item_id = item.id;
    ctl.db(move |conn| Ok(OperationItem::start_attempt(conn, item_id)?))
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match item.action.as_str() {
        "create" => create(ctl, item, &instance, &node, agent.as_ref()).await,
        "start" | "stop" | "restart" | "evacuate_stop" => {
            change_state(ctl, op, item, &instance, &node, agent.as_ref()).await
        }
        crate::moves::STEP | crate::moves::EVACUATE_STEP => {
            crate::moves::run(ctl, op, item, &instance, &node).await
        }
        "reset" => reset(ctl, &instance, &node, agent.as_ref()).await,
        "publish" => publish(ctl, op, &instance, &node, agent.as_ref()).await,
        "detach_gpus" => detach_gpus(ctl, &instance, &node, agent.as_ref()).await,
        crate::actions::course_resize::STEP => {
            crate::actions::course_resize::apply_step(&instance, &node, agent.as_ref()).await
        }
        other => Ok(StepOutcome::Failed(format!("unknown step {other:?}"))),
    }
}

/// Cohort's observed state for an LXD status (`Running`, `Stopped`, anything else an error).
pub(crate) fn observed(status: &str) -> &'static str {
    match status {
        "Running" => "running",
        "Stopped" => "stopped",
        _ => "error",
    }
}

/// Fetches the image onto the node from the controller's store if the node lacks it.
pub(crate) async fn ensure_image(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    image: &Image,
) -> Result<(), ActionError> {
    let (image_id, node_id) = (image.id, node.id);
    if ctl
        .db(move |conn| Ok(Image::held_by(conn, image_id, node_id)?))
        .await?
    {
        return Ok(());
    }
    import_image(ctl, node, agent, image).await
}

/// Has the agent fetch the image from the controller's store and alias it.
async fn import_image(
    ctl: &Controller,
    node: &Node,
    agent: &dyn NodeAgent,
    image: &Image,
) -> Result<(), ActionError> {
    let (image_id, node_id) = (image.id, node.id);
    let url = format!(
        "{}/api/v1/images/{}/tarball",
        ctl.config.public_url(),
        image.fingerprint
    );
    agent
        .import_image(ImportImage {
            url,
            alias: image.alias.clone(),
            fingerprint: image.fingerprint.clone(),
        })
        .await
        .map_err(ActionError::on_node(&node.name))?;
    ctl.db(move |conn| Ok(Image::mark_held(conn, image_id, node_id)?))
        .await
}

/// The address the SSH proxy device listens on: the node's SSH host when it is an address.
fn listen_address(ssh_host: &str) -> String {
    match ssh_host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => "0.0.0.0".to_string(),
    }
}

async fn create(
    ctl: &Controller,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let (owner_id, image_id, id) = (instance.owner_id, instance.image_id, instance.id);
    let course_id = instance.course_id;
    let (row, placement) = (instance.clone(), ctl.config.placement.clone());
    let (owner, keys, image, gpus, network_policy, cap, home_mib) = ctl
        .db(move |conn| {
            Ok((
                User::find(conn, owner_id)?,
                SshKey::for_user(conn, owner_id)?,
                Image::find(conn, image_id)?,
                GpuAllocation::for_instance(conn, id)?,
                match course_id {
                    Some(course) => Some(CourseNetwork::of(conn, course)?),
                    None => None,
                },
                processes::cap(conn, &row, &placement)?,
                match course_id {
                    Some(course) => Some(homes::mib_of(conn, course, &placement)?),
                    None => None,
                },
            ))
        })
        .await?;
    let mut config: std::collections::BTreeMap<String, String> =
        serde_json::from_value(instance.config.clone()).unwrap_or_default();
    // Every container gets a process limit; a value its owner set (checked then) stays.
    config
        .entry(processes::KEY.to_string())
        .or_insert_with(|| cap.to_string());
    ensure_image(ctl, node, agent, &image).await?;
    let request = CreateInstance {
        idempotency_key: item.id.to_string(),
        name: instance.name.clone(),
        // The catalog alias: the agent imports images under it (see `ensure_image`).
        source: InstanceSource::Image {
            alias: image.alias.clone(),
        },
        limits: Limits {
            cpu: instance.cpu as u32,
            memory_mib: instance.memory_mib as u64,
            disk_gib: instance.disk_gib as u64,
        },
        gpus: gpus.iter().map(|(g, _)| attachment(g)).collect(),
        ssh: ssh_access(&owner, &keys, instance, node),
        home_volume: instance.course_id.map(|_| home_volume(&instance.name)),
        home_mib,
        config,
        start: instance.desired_state == "running",
        network_policy,
    };
    let made = match agent.create_instance(request.clone()).await {
        // The node's LXD lost the alias although the poller saw the image (an alias being
        // replaced, or removed by hand): import it again, then try once more.
        Err(AgentError::Status {
            status: 404,
            message,
            ..
        }) if message.contains("image") => {
            tracing::warn!(node = %node.name, image = %image.alias, "image alias missing on the node; importing it again");
            import_image(ctl, node, agent, &image).await?;
            agent.create_instance(request).await
        }
        other => other,
    }
    .map_err(ActionError::on_node(&node.name))?;
    let state = observed(&made.status);
    ctl.db(move |conn| {
        Ok(Instance::set_created(
            conn,
            id,
            state,
            made.ssh_host_key.as_deref(),
        )?)
    })
    .await?;
    Ok(StepOutcome::Done)
}

/// How the agent pins an allocated GPU.
pub(crate) fn attachment(g: &Gpu) -> GpuAttachment {
    GpuAttachment {
        uuid: g.uuid.clone(),
        // A MIG instance keeps its parent's PCI address (its row holds the parent's): LXD picks
        // the card a `gputype=mig` device names by `pci`, and refuses one that matches more
        // than one card, as every card does on a node of several GPUs when `pci` is left out.
        pci_address: Some(g.pci_address.clone()),
        mig_uuid: g.mig_parent.as_ref().map(|_| g.uuid.clone()),
    }
}

/// The owner's way into the instance. An owner with neither a key nor a password still gets
/// their user (and home) with no way in: nothing is open until they add a key, which then
/// reaches the running container at once.
pub fn ssh_access(
    owner: &User,
    keys: &[SshKey],
    instance: &Instance,
    node: &Node,
) -> Option<SshAccess> {
    // A disabled owner gets the user with no way in (no key, no password) in a new container;
    // in a running one `push_ssh` removes their login instead.
    let disabled = owner.is_disabled();
    instance.ssh_port.map(|port| SshAccess {
        username: owner.username.clone(),
        authorized_keys: if disabled {
            Vec::new()
        } else {
            keys.iter().map(|k| k.public_key.clone()).collect()
        },
        password_hash: owner.password_hash.clone().filter(|_| !disabled),
        sudo: true,
        listen_address: listen_address(&node.ssh_host),
        port: port as u16,
    })
}

/// Empties the user's authorized_keys and locks their password: what is left of an account an
/// admin disables or deletes. Setting a password again (`chpasswd -e`) unlocks.
const REVOKE_LOGIN: &str = r#"h=$(getent passwd "$1" | cut -d: -f6) && [ -n "$h" ] && [ -f "$h/.ssh/authorized_keys" ] && : > "$h/.ssh/authorized_keys"; usermod -L "$1" 2>/dev/null; true"#;

/// Removes `username`'s way into one running instance (see [`REVOKE_LOGIN`]).
pub async fn revoke_login(
    agent: &dyn NodeAgent,
    node: &Node,
    instance: &str,
    username: &str,
) -> Result<(), ActionError> {
    let request = cohort_proto::agent::ExecRequest {
        command: vec![
            "/bin/sh".into(),
            "-c".into(),
            REVOKE_LOGIN.into(),
            "cohort-revoke".into(),
            username.to_string(),
        ],
        environment: Default::default(),
        user: None,
        group: None,
        cwd: None,
        stdin_base64: None,
        timeout_s: Some(60),
    };
    agent
        .exec(instance.to_string(), request)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    Ok(())
}

/// Applies the owner's current keys (or password) to one running instance on its node.
pub async fn push_ssh(ctl: &Controller, instance: &Instance) -> Result<(), ActionError> {
    let Some(node_id) = instance.node_id else {
        return Ok(());
    };
    if instance.ssh_port.is_none() {
        return Ok(());
    }
    let owner_id = instance.owner_id;
    let (owner, keys) = ctl
        .db(move |conn| {
            Ok((
                User::find(conn, owner_id)?,
                SshKey::for_user(conn, owner_id)?,
            ))
        })
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match ssh_access(&owner, &keys, instance, &node) {
        Some(_) if owner.is_disabled() => {
            revoke_login(agent.as_ref(), &node, &instance.name, &owner.username).await?
        }
        Some(access) => {
            agent
                .set_ssh(instance.name.clone(), access)
                .await
                .map_err(ActionError::on_node(&node.name))?;
        }
        None => {}
    }
    Ok(())
}

/// Applies a user's keys to every running instance of theirs; stopped ones get them when they
/// next start. Failures are logged and returned by instance name; the keys stay stored.
pub async fn push_ssh_to_user(ctl: &Controller, user_id: i64) -> Vec<(String, String)> {
    let rows = match ctl
        .db(move |conn| Ok(Instance::list(conn, Some(user_id))?))
        .await
    {
        Ok(rows) => rows,
        Err(e) => return vec![(String::new(), e.to_string())],
    };
    let mut failed = Vec::new();
    for instance in rows
        .iter()
        .filter(|i| i.observed_state == "running" && i.desired_state == "running")
    {
        if let Err(e) = push_ssh(ctl, instance).await {
            tracing::warn!(instance = %instance.name, error = %e, "applying SSH keys failed");
            failed.push((instance.name.clone(), e.to_string()));
        }
    }
    failed
}

/// The custom volume holding a course student's home: it outlives resets and re-provisions.
pub fn home_volume(instance: &str) -> String {
    let name: String = format!("home-{instance}").chars().take(63).collect();
    name.trim_end_matches('-').to_string()
}

/// Deletes the container (its home volume stays) so the next `create` step makes it afresh.
async fn reset(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    agent
        .delete_instance(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let id = instance.id;
    ctl.db(move |conn| Ok(Instance::set_observed(conn, id, "pending", None)?))
        .await?;
    Ok(StepOutcome::Done)
}

async fn change_state(
    ctl: &Controller,
    op: &Operation,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let action = match item.action.as_str() {
        "start" => StateAction::Start,
        "restart" => StateAction::Restart,
        _ => StateAction::Stop,
    };
    if matches!(action, StateAction::Start | StateAction::Restart) && instance.gpu_count > 0 {
        if let Some(wait) = take_gpus_again(ctl, item, instance, node, agent, action).await? {
            return Ok(wait);
        }
    }
    let change = StateChange {
        action,
        timeout_s: op
            .payload
            .get("timeout_s")
            .and_then(|v| v.as_u64())
            .map(|v| v as u32),
        force: item.action == "evacuate_stop"
            || op
                .payload
                .get("force")
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
    };
    let now = agent
        .change_state(instance.name.clone(), change)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let (id, state) = (instance.id, observed(&now.status));
    ctl.db(move |conn| Ok(Instance::set_observed(conn, id, state, None)?))
        .await?;
    let release = op.payload.get("release_gpus").and_then(|v| v.as_bool()) == Some(true);
    if action == StateAction::Stop && release && state == "stopped" {
        give_gpus_back(ctl, instance, node, agent).await?;
    }
    // Keys added or removed while it was stopped take effect now.
    if state == "running" && matches!(action, StateAction::Start | StateAction::Restart) {
        if let Err(e) = push_ssh(ctl, instance).await {
            tracing::warn!(instance = %instance.name, error = %e, "applying SSH keys after start failed");
        }
    }
    Ok(StepOutcome::Done)
}

/// After a reclaimer's stop: the stopped container's `cohort-gpu*` devices come off first, then
/// its slots are released and the queue woken, so the GPU goes to someone waiting and a start
/// outside Cohort cannot take it back.
async fn give_gpus_back(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<(), ActionError> {
    let id = instance.id;
    let holds = ctl
        .db(move |conn| Ok(GpuAllocation::for_instance(conn, id)?.len()))
        .await?;
    if holds == 0 {
        return Ok(());
    }
    agent
        .detach_gpus(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let released = ctl
        .db(move |conn| Ok(GpuAllocation::release(conn, id)?))
        .await?;
    tracing::info!(instance = %instance.name, released, "GPU slots given back after a stop");
    ctl.capacity_freed.notify_waiters();
    Ok(())
}

/// Before a start: an instance whose slots were given back takes them again on its node and
/// gets its devices back (stopped first for a restart: a MIG device cannot be hot-plugged);
/// `Some(wait)` when no GPU there has room, the reason left on the instance and the item.
async fn take_gpus_again(
    ctl: &Controller,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
    action: StateAction,
) -> Result<Option<StepOutcome>, ActionError> {
    let (row, item_id) = (instance.clone(), item.id);
    let taken = ctl
        .db(move |conn| {
            let taken = gpu_slots::take_again(conn, &row)?;
            match &taken {
                gpu_slots::Taken::Short(why) => {
                    Instance::set_error(conn, row.id, Some(why))?;
                    OperationItem::wait(conn, item_id, why)?;
                }
                gpu_slots::Taken::Again => InstanceUsage::clear_detached(conn, row.id)?,
                gpu_slots::Taken::Held => {}
            }
            Ok(taken)
        })
        .await?;
    match taken {
        gpu_slots::Taken::Held => Ok(None),
        gpu_slots::Taken::Short(why) => {
            tracing::info!(instance = %instance.name, %why, "start waits for a GPU");
            Ok(Some(StepOutcome::Wait(Duration::from_secs(
                ctl.config.placement.queue_interval_s.max(1),
            ))))
        }
        gpu_slots::Taken::Again => {
            if action == StateAction::Restart {
                let stop = StateChange {
                    action: StateAction::Stop,
                    timeout_s: None,
                    force: false,
                };
                agent
                    .change_state(instance.name.clone(), stop)
                    .await
                    .map_err(ActionError::on_node(&node.name))?;
            }
            let id = instance.id;
            let gpus = ctl
                .db(move |conn| Ok(GpuAllocation::for_instance(conn, id)?))
                .await?;
            agent
                .attach_gpus(
                    instance.name.clone(),
                    AttachGpus {
                        gpus: gpus.iter().map(|(g, _)| attachment(g)).collect(),
                    },
                )
                .await
                .map_err(ActionError::on_node(&node.name))?;
            tracing::info!(instance = %instance.name, gpus = gpus.len(), "GPU slots taken again");
            Ok(None)
        }
    }
}

/// The reclaimer's `detach`: the node takes the `cohort-gpu*` devices off the (still running)
/// container first, then the slots are released, so no GPU is ever handed out while still
/// attached.
async fn detach_gpus(
    ctl: &Controller,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    agent
        .detach_gpus(instance.name.clone())
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let id = instance.id;
    let released = ctl
        .db(move |conn| Ok(GpuAllocation::release(conn, id)?))
        .await?;
    tracing::info!(instance = %instance.name, released, "GPU slots released");
    ctl.capacity_freed.notify_waiters();
    Ok(StepOutcome::Done)
}

/// Whether `op` is a course teardown that deletes the students' home volumes too.
fn wipes_homes(op: &Operation) -> bool {
    let flag = |key: &str| op.payload.get(key).and_then(|v| v.as_bool()) == Some(true);
    op.kind == crate::views::kind_name(OperationKind::TeardownCourse)
        && flag("delete")
        && !flag("keep_homes")
}

/// Deletes the container (absent is fine), and for a teardown without `keep_homes` its home
/// volume, then the row, which frees its port and GPU slots.
async fn delete(
    ctl: &Controller,
    op: &Operation,
    item: &OperationItem,
    instance: Instance,
) -> Result<StepOutcome, ActionError> {
    if let Some(node_id) = instance.node_id {
        let item_id = item.id;
        ctl.db(move |conn| Ok(OperationItem::start_attempt(conn, item_id)?))
            .await?;
        let (node, agent) = ctl.agent_by_node_id(node_id).await?;
        agent
            .delete_instance(instance.name.clone())
            .await
            .map_err(ActionError::on_node(&node.name))?;
        if instance.course_id.is_some() && wipes_homes(op) {
            agent
                .delete_volume(home_volume(&instance.name))
                .await
                .map_err(ActionError::on_node(&node.name))?;
        }
    }
    let id = instance.id;
    ctl.db(move |conn| Ok(Instance::delete(conn, id)?)).await?;
    ctl.capacity_freed.notify_waiters();
    Ok(StepOutcome::Done)
}

/// The agent exports the stopped instance as an image (kept on its node under the alias); the
/// tarball lands in the catalog directory under its SHA-256 (which must be LXD's fingerprint),
/// and the catalog row records the node as holding it.
async fn publish(
    ctl: &Controller,
    op: &Operation,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let text = |key: &str| {
        op.payload
            .get(key)
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    let Some(alias) = text("alias") else {
        return Ok(StepOutcome::Failed("the operation names no alias".into()));
    };
    let description = text("description");
    let lookup = alias.clone();
    if ctl
        .db(move |conn| Ok(Image::lookup(conn, &lookup)?))
        .await?
        .is_some()
    {
        // An earlier attempt finished before its outcome was recorded.
        return Ok(StepOutcome::Done);
    }
    let dir = ctl.images_dir();
    std::fs::create_dir_all(&dir)?;
    let temp = tempfile::Builder::new()
        .prefix(".publish-")
        .tempfile_in(&dir)?
        .into_temp_path();
    let got = agent
        .publish(
            instance.name.clone(),
            PublishInstance {
                alias: Some(alias.clone()),
                description: description.clone(),
                keep: true,
            },
            temp.to_path_buf(),
        )
        .await
        .map_err(ActionError::on_node(&node.name))?;
    if got.size == 0 {
        return Ok(StepOutcome::Retry("the agent sent an empty tarball".into()));
    }
    if got.reported.as_ref().is_some_and(|r| *r != got.sha256) {
        return Ok(StepOutcome::Retry(format!(
            "the tarball's SHA-256 {} is not LXD's fingerprint {:?}",
            got.sha256, got.reported
        )));
    }
    let path = crate::actions::images::tarball_path(ctl, &got.sha256);
    temp.persist(&path).map_err(|e| ActionError::Io(e.error))?;
    let (image_id, node_id, by) = (instance.image_id, node.id, op.created_by);
    let (name, fingerprint, size) = (instance.name.clone(), got.sha256.clone(), got.size as i64);
    let stored = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let source = Image::find(conn, image_id)?;
                let image = Image::insert(
                    conn,
                    &NewImage {
                        fingerprint: &fingerprint,
                        alias: &alias,
                        description: description.as_deref().unwrap_or(""),
                        gpu_ready: source.gpu_ready,
                        size_bytes: size,
                        created_by: by,
                    },
                )?;
                Image::mark_held(conn, image.id, node_id)?;
                let actor = match by {
                    Some(id) => User::find(conn, id)?.username,
                    None => "system".into(),
                };
                audit::record(
                    conn,
                    &actor,
                    "published",
                    "image",
                    &alias,
                    serde_json::json!({"instance": name, "fingerprint": fingerprint}),
                )?;
                Ok(())
            })
        })
        .await;
    match stored {
        Ok(()) => Ok(StepOutcome::Done),
        Err(ActionError::Database(diesel::result::Error::DatabaseError(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            _,
        ))) => Ok(StepOutcome::Failed(format!(
            "the catalog already holds an image with fingerprint {}",
            got.sha256
        ))),
        Err(e) => Err(e),
    }
}
