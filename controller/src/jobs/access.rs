//! The steps that change a way into containers already made: `apply_network_policy` (a
//! course's stored network policy, applied live by the agent), `apply_ssh_keys` (the owner's
//! current keys or password, or a disabled owner's login removed) and `revoke_login` (a former
//! owner's login removed), and the operations a request records for them: `set_course_network`
//! with one item per placed container of the course, `apply_logins` with one per running
//! container of the person.
//!
//! Each step reads what to apply when it runs, so a retried one applies the latest state. A
//! container not made yet, or not running, has nothing to change now: it is made (or started)
//! with the stored policy and keys. An agent that cannot be reached keeps the item pending, its
//! reason shown on it, and it is applied when the agent answers again; an agent that answers
//! with an error is retried with backoff, and the item, then the operation, fails with the
//! reason once the worker gives up.

use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::prelude::*;

use super::outcome::StepOutcome;
use super::payload::{Job, Logins, OfCourse};
use super::worker::backoff;
use super::{enqueue, Step, StepKind};
use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::db::models::course_network::CourseNetwork;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::user::User;
use crate::error::ActionError;
use crate::jobs::logins::{push_ssh, revoke_login};

/// Whether `kind` is one of this module's steps.
pub fn is_access(kind: StepKind) -> bool {
    matches!(
        kind,
        StepKind::ApplyNetworkPolicy | StepKind::ApplySshKeys | StepKind::RevokeLogin
    )
}

/// Runs one of this module's steps.
pub async fn run(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
) -> Result<StepOutcome, ActionError> {
    let Some(instance_id) = item.instance_id else {
        return Ok(StepOutcome::Done);
    };
    let instance = ctl
        .db(move |conn| Ok(Instance::find(conn, instance_id).optional()?))
        .await?;
    // Gone, going, or not made yet: it is made with the stored policy and logins, if at all.
    let Some(instance) = instance.filter(|i| i.desired_state != DesiredState::Deleted) else {
        return Ok(StepOutcome::Done);
    };
    let Some(node_id) = instance.node_id else {
        return Ok(StepOutcome::Done);
    };
    // Logins change only in a running container; a stopped one gets them when it starts.
    if item.action != StepKind::ApplyNetworkPolicy
        && instance.observed_state != ObservedState::Running
    {
        return Ok(StepOutcome::Done);
    }
    let item_id = item.id;
    ctl.db(move |conn| Ok(OperationItem::start_attempt(conn, item_id)?))
        .await?;
    match apply(ctl, job, item, &instance, node_id).await {
        // A node whose agent cannot be reached keeps the change pending, its reason on the
        // item, until the agent answers again: a security control is not given up on while
        // its node is away (a node gone for good has its containers moved or deleted, which
        // ends the step). An agent that answers with an error is retried and given up on
        // like any other step.
        Err(ActionError::Agent {
            node,
            source: source @ AgentError::Unreachable(_),
        }) => {
            let why = format!("waiting for node {node}'s agent: {source}");
            ctl.db(move |conn| Ok(OperationItem::note_error(conn, item_id, &why)?))
                .await?;
            let attempts = item.attempts as u32 + 1;
            Ok(StepOutcome::Wait(backoff(
                ctl.config.worker.backoff_s,
                attempts,
            )))
        }
        other => other,
    }
}

/// The step's change, sent to the container's agent.
async fn apply(
    ctl: &Controller,
    job: &Job,
    item: &OperationItem,
    instance: &Instance,
    node_id: i64,
) -> Result<StepOutcome, ActionError> {
    match item.action {
        StepKind::ApplyNetworkPolicy => apply_network_policy(ctl, instance, node_id).await,
        StepKind::ApplySshKeys => push_ssh(ctl, instance).await.map(|_| StepOutcome::Done),
        _ => {
            let Some(user) = job.login_user() else {
                return Ok(StepOutcome::Failed(format!(
                    "a {} operation has no user whose login to remove",
                    job.kind()
                )));
            };
            let (node, agent) = ctl.agent_by_node_id(node_id).await?;
            revoke_login(agent.as_ref(), &node, &instance.name, user).await?;
            Ok(StepOutcome::Done)
        }
    }
}

/// Sends the course's stored policy to the container's agent; a container its node does not
/// have (any more) is made with the stored policy, so there is nothing to do.
async fn apply_network_policy(
    ctl: &Controller,
    instance: &Instance,
    node_id: i64,
) -> Result<StepOutcome, ActionError> {
    let Some(course) = instance.course_id else {
        return Ok(StepOutcome::Done);
    };
    let policy = ctl
        .db(move |conn| Ok(CourseNetwork::of(conn, course)?))
        .await?;
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match agent
        .set_network_policy(instance.name.clone(), policy)
        .await
    {
        Ok(_) | Err(AgentError::Status { status: 404, .. }) => Ok(StepOutcome::Done),
        Err(e) => Err(ActionError::on_node(node.name)(e)),
    }
}

/// The node names by id, for the items' `node`.
fn node_names(conn: &mut PgConnection) -> QueryResult<std::collections::HashMap<i64, String>> {
    Ok(Node::list(conn)?
        .into_iter()
        .map(|n| (n.id, n.name))
        .collect())
}

/// Records `job` with one `action` item per instance; none when there is no instance.
fn record(
    conn: &mut PgConnection,
    job: &Job,
    created_by: Option<i64>,
    target: &str,
    action: StepKind,
    instances: &[Instance],
) -> QueryResult<Option<Operation>> {
    if instances.is_empty() {
        return Ok(None);
    }
    let nodes = node_names(conn)?;
    let steps: Vec<Step<'_>> = instances
        .iter()
        .map(|i| {
            let step = Step::new(action, &i.name, Some(i.id));
            match i.node_id.and_then(|n| nodes.get(&n)) {
                Some(node) => step.on(node),
                None => step,
            }
        })
        .collect();
    enqueue(conn, job, created_by, target, &steps, None).map(Some)
}

/// A `set_course_network` operation: the course's stored policy to each of its containers on a
/// node. In the caller's transaction, after the policy is stored.
pub fn enqueue_network(
    conn: &mut PgConnection,
    code: &str,
    course_id: i64,
    created_by: Option<i64>,
) -> QueryResult<Option<Operation>> {
    let placed: Vec<Instance> = crate::courses::course::course_instances(conn, course_id)?
        .into_iter()
        .filter(|i| i.node_id.is_some() && i.desired_state != DesiredState::Deleted)
        .collect();
    let job = Job::SetCourseNetwork(OfCourse {
        course: code.to_string(),
    });
    record(
        conn,
        &job,
        created_by,
        code,
        StepKind::ApplyNetworkPolicy,
        &placed,
    )
}

/// The running containers `instances` of which a login changes.
fn running(instances: Vec<Instance>) -> Vec<Instance> {
    instances
        .into_iter()
        .filter(|i| {
            i.observed_state == ObservedState::Running && i.desired_state == DesiredState::Running
        })
        .collect()
}

/// An `apply_logins` operation: `user`'s current logins (keys, password, or none when
/// disabled) to each of their running containers. In the caller's transaction, after the
/// change is stored.
pub fn enqueue_logins(
    conn: &mut PgConnection,
    user_id: i64,
    username: &str,
    created_by: Option<i64>,
) -> QueryResult<Option<Operation>> {
    let owned = running(Instance::list(conn, Some(user_id))?);
    let job = Job::ApplyLogins(Logins {
        user: username.to_string(),
    });
    record(
        conn,
        &job,
        created_by,
        username,
        StepKind::ApplySshKeys,
        &owned,
    )
}

/// Applies the owner's login to an instance a start or a move just brought back. When that
/// fails, an `apply_logins` operation for the instance takes over, so the worker retries it
/// (waiting for an agent away, as above) until it applies: keys removed while the container was
/// stopped or moving are a security control, never only logged. The operation runs after the
/// step that asked for it, operations on one instance running in order.
pub async fn push_or_retry(ctl: &Controller, instance: &Instance, after: &'static str) {
    let Err(e) = push_ssh(ctl, instance).await else {
        return;
    };
    let (id, name) = (instance.id, instance.name.clone());
    let recorded = ctl
        .db(move |conn| {
            let Some(instance) = Instance::find(conn, id).optional()? else {
                return Ok(None);
            };
            let owner = User::find(conn, instance.owner_id)?;
            let job = Job::ApplyLogins(Logins {
                user: owner.username.clone(),
            });
            let steps = running(vec![instance]);
            Ok(record(
                conn,
                &job,
                None,
                &owner.username,
                StepKind::ApplySshKeys,
                &steps,
            )?)
        })
        .await;
    match recorded {
        Ok(Some(op)) => tracing::warn!(
            instance = %name, error = %e, operation = %op.id,
            "applying SSH keys after {after} failed; an apply_logins operation retries it"
        ),
        Ok(None) => tracing::info!(
            instance = %name, error = %e,
            "applying SSH keys after {after} failed; the instance no longer runs"
        ),
        Err(db) => tracing::error!(
            instance = %name, error = %e, db_error = %db,
            "applying SSH keys after {after} failed and its retry could not be recorded"
        ),
    }
}

/// An `apply_logins` operation removing `username`'s login from the running ones of
/// `instances` (a deleted account's containers, kept by the admin).
pub fn enqueue_revoke(
    conn: &mut PgConnection,
    username: &str,
    instances: Vec<Instance>,
    created_by: Option<i64>,
) -> QueryResult<Option<Operation>> {
    let job = Job::ApplyLogins(Logins {
        user: username.to_string(),
    });
    record(
        conn,
        &job,
        created_by,
        username,
        StepKind::RevokeLogin,
        &running(instances),
    )
}
