//! A course's network policy: checked, stored with its audit row, and pushed at once to every
//! placed container of the course, whose agent applies it without a restart. A container the
//! push misses (its node down) gets the stored policy with its next create or re-provision.

use cohort_proto::agent::NetworkPolicy;
use cohort_proto::api::courses::Course as WireCourse;
use diesel::Connection;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::courses::course::{check_network, course_instances, view, writable};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_network::CourseNetwork;
use crate::error::{ActionError, ActionResult};

/// `PUT /api/v1/courses/{code}/network`.
pub async fn set(
    ctl: &Controller,
    caller: Caller,
    code: String,
    policy: NetworkPolicy,
) -> ActionResult<WireCourse> {
    check_network(&policy)?;
    let stored = policy.clone();
    let (course, placed) = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let course = writable(conn, &caller, &code)?;
                CourseNetwork::set(conn, course.id, &stored)?;
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::SetNetwork,
                    AuditObject::Course,
                    &code,
                    json!(stored),
                )?;
                let placed: Vec<(String, i64)> = course_instances(conn, course.id)?
                    .into_iter()
                    .filter_map(|i| Some((i.name, i.node_id?)))
                    .collect();
                Ok((view(conn, &course)?, placed))
            })
        })
        .await?;
    for (name, node_id) in placed {
        if let Err(e) = push(ctl, &name, node_id, &policy).await {
            tracing::warn!(instance = %name, error = %e, "applying the course's network policy failed; it is applied on the next provision");
        }
    }
    Ok(course)
}

/// Sends the policy to the agent of `node_id`; an instance not made yet is no failure.
async fn push(
    ctl: &Controller,
    name: &str,
    node_id: i64,
    policy: &NetworkPolicy,
) -> ActionResult<()> {
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    match agent
        .set_network_policy(name.to_string(), policy.clone())
        .await
    {
        Ok(_) | Err(AgentError::Status { status: 404, .. }) => Ok(()),
        Err(e) => Err(ActionError::on_node(node.name)(e)),
    }
}
