//! The `create` step: the agent makes the container from the catalog image with its limits,
//! GPUs, SSH access, home volume and network policy. A create the daemon still runs after the
//! agent's wait (503 `creating`) is waited for, not counted as a failed attempt.

use cohort_proto::agent::{CreateInstance, InstanceSource, Limits};
use cohort_proto::api::instances::DesiredState;

use super::gpus::attachment;
use super::import_image::{ensure_image, import_image};
use super::outcome::StepOutcome;
use crate::accounts::ssh::ssh_access;
use crate::agent_client::observed;
use crate::agent_client::{AgentError, NodeAgent};
use crate::app::state::Controller;
use crate::db::models::course_home_snapshots::CourseHomeSnapshots;
use crate::db::models::course_network::CourseNetwork;
use crate::db::models::gpu_allocation::GpuAllocation;
use crate::db::models::image::Image;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;
use crate::error::ActionError;
use crate::placement::home_size::{self, home_volume};
use crate::placement::process_limit;

/// The container named `name` on the node when an earlier create of instance `id` made it (its
/// idempotency key is one of that instance's create items).
pub async fn own_container(
    ctl: &Controller,
    agent: &dyn NodeAgent,
    id: i64,
    name: &str,
) -> Result<Option<cohort_proto::agent::Instance>, ActionError> {
    let Ok(found) = agent.get_instance(name.to_string()).await else {
        return Ok(None);
    };
    let Some(key) = found.idempotency_key.clone() else {
        return Ok(None);
    };
    let own = ctl
        .db(move |conn| Ok(OperationItem::made_for(conn, &key, id)?))
        .await?;
    if own {
        tracing::warn!(
            instance = name,
            "create found the instance's own container already made; kept"
        );
    }
    Ok(own.then_some(found))
}

/// How soon a create the node's daemon still runs is asked after again.
const STILL_CREATING_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

pub async fn run(
    ctl: &Controller,
    item: &OperationItem,
    instance: &Instance,
    node: &Node,
    agent: &dyn NodeAgent,
) -> Result<StepOutcome, ActionError> {
    let (owner_id, image_id, id) = (instance.owner_id, instance.image_id, instance.id);
    let course_id = instance.course_id;
    let (row, placement) = (instance.clone(), ctl.config.placement.clone());
    let gpu_row = instance.clone();
    let (owner, keys, image, gpus, network_policy, cap, home_mib, gpu_memory, home_snapshots) = ctl
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
                process_limit::cap(conn, &row, &placement)?,
                match course_id {
                    Some(course) => Some(home_size::mib_of(conn, course, &placement)?),
                    None => None,
                },
                super::gpus::course_gpu_memory(conn, &gpu_row)?,
                match course_id {
                    Some(course) => CourseHomeSnapshots::of(conn, course)?,
                    None => None,
                },
            ))
        })
        .await?;
    let mut config = instance.config_map()?;
    // Every container gets a process limit; a value its owner set (checked then) stays.
    config
        .entry(process_limit::KEY.to_string())
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
        gpus: gpus
            .iter()
            .map(|(g, _)| attachment(g, instance, gpu_memory))
            .collect(),
        ssh: ssh_access(&owner, &keys, instance, node),
        home_volume: instance.course_id.map(|_| home_volume(&instance.name)),
        home_mib,
        home_snapshots,
        config,
        start: instance.desired_state == DesiredState::Running,
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
        // The node's daemon still creates it past the agent's wait: not a failure, and no
        // attempt spent; asked again, the agent waits on that same create.
        Err(AgentError::Status {
            status: 503,
            code,
            message,
            ..
        }) if code == "creating" => {
            tracing::info!(node = %node.name, instance = %instance.name, %message, "still being created; looking again later");
            return Ok(StepOutcome::Wait(STILL_CREATING_RECHECK));
        }
        // The name is taken: by this instance's own container, made by an earlier create (a
        // repair of drift that was not there), it is the instance, made; by anything else the
        // conflict stands.
        Err(AgentError::Status {
            status: 409,
            message,
            code,
            field,
        }) => match own_container(ctl, agent, id, &instance.name).await? {
            Some(own) => Ok(own),
            None => Err(AgentError::Status {
                status: 409,
                message,
                code,
                field,
            }),
        },
        other => other,
    }
    .map_err(ActionError::on_node(&node.name))?;
    super::sync_data::mount_at_create(ctl, node, agent, instance).await?;
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
