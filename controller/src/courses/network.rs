//! A course's network policy: checked, stored with its audit row and a `set_course_network`
//! operation with one item per placed container of the course, whose agent applies it without
//! a restart (see [`crate::jobs::access`]). The answer waits a while for the operation; an item
//! whose node is down is retried, and fails visibly with the reason if it never comes back. A
//! container not made yet gets the stored policy when it is made.

use cohort_proto::agent::NetworkPolicy;
use cohort_proto::api::courses::Course as WireCourse;
use diesel::Connection;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::courses::course::{check_network, view, writable};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course_network::CourseNetwork;
use crate::error::ActionResult;
use crate::jobs::access::enqueue_network;
use crate::jobs::settle::settle_recorded;

/// `PUT /api/v1/courses/{code}/network`.
pub async fn set(
    ctl: &Controller,
    caller: Caller,
    code: String,
    policy: NetworkPolicy,
) -> ActionResult<WireCourse> {
    check_network(&policy)?;
    let stored = policy;
    let (course, op) = ctl
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
                let op = enqueue_network(conn, &code, course.id, Some(caller.user.id))?;
                Ok((view(conn, &course)?, op.map(|op| op.id)))
            })
        })
        .await?;
    settle_recorded(ctl, op).await?;
    Ok(course)
}
