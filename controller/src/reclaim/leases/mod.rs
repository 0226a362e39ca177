//! GPUs on demand (issue 43). A course in `on-demand` mode makes its containers without a GPU; a
//! student asks for one (`POST /instances/{name}/gpu-lease`, `cohort gpu attach`, the portal's
//! button) for a lease of some hours, capped by the course's `gpu_lease_max_hours`. The request
//! is a row (`gpu_leases`), queued until a GPU on the container's node is free; who goes first
//! is [`queue`]'s fair share. A grant takes the GPU slot in the same transaction as the row
//! turns active and enqueues the `attach_gpus` operation; the lease's end (or an early give
//! back) enqueues the `detach_gpus` one: the node is changed only by the job worker, and the
//! rows survive a controller restart, as the queue does.

use cohort_proto::api::courses::{Course as WireCourse, CourseGpuMode as WireMode, GpuHours};
use cohort_proto::api::gpu_leases::{GpuLease as WireLease, GpuLeaseRequest, LeaseState};
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::courses::course::{teaches, view as course_view, writable};
use crate::db::enums::{AuditAction, AuditObject, StepKind};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::gpu_lease::{CourseGpuMode, GpuLease, LeaseNames, ON_DEMAND};
use crate::db::models::instance::Instance;
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::reclaim_warning::{ReclaimWarning, LEASE_END};
use crate::error::{ActionError, ActionResult};
use crate::instances::manage::find;
use crate::jobs::payload::{Job, Reclaimed};
use crate::jobs::{enqueue, Audit, Step};

pub mod queue;

/// The longest lease a course may allow, in hours (a week).
pub const MAX_LEASE_HOURS: f64 = 168.0;

/// A lease's length when the student names none, and a course's maximum when it sets none.
pub const DEFAULT_LEASE_HOURS: f64 = 2.0;

/// How many GPUs a new container of `course` is made with: none on demand.
pub fn gpus_at_creation(conn: &mut PgConnection, course: &Course) -> QueryResult<i32> {
    Ok(match CourseGpuMode::on_demand(conn, course.id)? {
        Some(_) => 0,
        None => course.gpus,
    })
}

/// What the course's view shows: its mode, and on demand the longest lease.
pub fn shown(conn: &mut PgConnection, course_id: i64) -> QueryResult<(String, Option<GpuHours>)> {
    Ok(match CourseGpuMode::on_demand(conn, course_id)? {
        Some(m) => (ON_DEMAND.into(), Some(GpuHours(m.gpu_lease_max_hours))),
        None => ("pinned".into(), None),
    })
}

/// Hours given for `field`: more than 0 and at most `most`, else a 400 naming it.
fn check_hours(field: &str, hours: GpuHours, most: f64, whose: &str) -> ActionResult<f64> {
    let h = hours.0;
    if h.is_finite() && h > 0.0 && h <= most {
        Ok(h)
    } else {
        Err(ActionError::invalid(
            field,
            format!("must be more than 0 and at most {most} hours ({whose})"),
        ))
    }
}

/// `PUT /courses/{code}/gpu-mode`: pinned or on demand, and the longest lease. Containers
/// made before keep the GPUs they were made with.
pub async fn set_mode(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: WireMode,
) -> ActionResult<WireCourse> {
    let on_demand = match req.gpu_mode.as_str() {
        ON_DEMAND => true,
        "pinned" => false,
        _ => {
            return Err(ActionError::invalid(
                "gpu_mode",
                "must be pinned or on-demand",
            ))
        }
    };
    let max = match req.gpu_lease_max_hours {
        Some(h) => check_hours("gpu_lease_max_hours", h, MAX_LEASE_HOURS, "a week")?,
        None => DEFAULT_LEASE_HOURS,
    };
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let row = CourseGpuMode {
                course_id: course.id,
                gpu_mode: if on_demand { ON_DEMAND } else { "pinned" }.into(),
                gpu_lease_max_hours: max,
            };
            CourseGpuMode::set(conn, &row)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetGpuMode,
                AuditObject::Course,
                &code,
                json!({"gpu_mode": row.gpu_mode, "gpu_lease_max_hours": max}),
            )?;
            Ok(course_view(conn, &course)?)
        })
    })
    .await
}

/// `POST /instances/{name}/gpu-lease`: queues a request for a GPU on the container's node and
/// grants it at once when it is first in line and a GPU is free.
pub async fn request(
    ctl: &Controller,
    caller: Caller,
    name: String,
    req: GpuLeaseRequest,
) -> ActionResult<WireLease> {
    // Checked before any row is read: a bad number is the caller's whatever the course.
    if let Some(h) = req.hours {
        check_hours("hours", h, MAX_LEASE_HOURS, "a week")?;
    }
    let hour_s = ctl.config.reclaim.lease_hour_s.max(1);
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            let Some(course_id) = instance.course_id else {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is not a course's: GPUs on demand are a course's"),
                ));
            };
            let Some(mode) = CourseGpuMode::on_demand(conn, course_id)? else {
                let code = Course::find(conn, course_id)?.code;
                return Err(ActionError::conflict(
                    Some("gpu_mode"),
                    format!(
                        "course {code} pins its GPUs (gpu_mode pinned): each container holds its \
                         GPUs from its creation, so there is no lease to ask for"
                    ),
                ));
            };
            let max = mode.gpu_lease_max_hours;
            let hours = match req.hours {
                Some(h) => check_hours("hours", h, max, "the course's gpu_lease_max_hours")?,
                None => DEFAULT_LEASE_HOURS.min(max),
            };
            if instance.desired_state != DesiredState::Running {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is not running: start it, then ask for a GPU"),
                ));
            }
            let Some(node_id) = instance.node_id else {
                return Err(ActionError::conflict(
                    None,
                    format!("instance {name} is queued, not on a node yet"),
                ));
            };
            if let Some(open) = GpuLease::open_of(conn, instance.id)? {
                return Err(ActionError::conflict(
                    None,
                    format!(
                        "instance {name} already has a GPU lease ({}); give it back first \
                         (cohort gpu detach {name})",
                        open.state
                    ),
                ));
            }
            let lease = GpuLease::queue(
                conn,
                instance.id,
                instance.owner_id,
                course_id,
                Some(node_id),
                hours,
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::RequestGpu,
                AuditObject::Instance,
                &name,
                json!({"lease": lease.id, "hours": hours}),
            )?;
            queue::grant_on_node(conn, node_id, hour_s, caller.name())?;
            let lease = GpuLease::open_of(conn, instance.id)?.unwrap_or(lease);
            Ok(view(conn, &lease)?)
        })
    })
    .await
}

/// `DELETE /instances/{name}/gpu-lease`: gives the GPU back early, or leaves the queue.
pub async fn release(ctl: &Controller, caller: Caller, name: String) -> ActionResult<WireLease> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let instance = find(conn, &caller, &name)?;
            let lease = GpuLease::open_of(conn, instance.id)?.ok_or_else(|| {
                ActionError::NotFound(format!("a GPU lease or request of instance {name}"))
            })?;
            let who = caller.name();
            if lease.state == LeaseState::Queued {
                let reason = format!("left the queue ({who})");
                GpuLease::close(conn, lease.id, LeaseState::Cancelled, &reason)?;
                audit::record(
                    conn,
                    who,
                    AuditAction::ReleaseGpu,
                    AuditObject::Instance,
                    &name,
                    json!({"lease": lease.id, "reason": reason}),
                )?;
            } else {
                let reason = format!("GPU given back early ({who})");
                GpuLease::close(conn, lease.id, LeaseState::Ended, &reason)?;
                detach(conn, &instance, &reason, who, AuditAction::ReleaseGpu)?;
            }
            let lease = GpuLease::latest_of(conn, instance.id)?.unwrap_or(lease);
            Ok(view(conn, &lease)?)
        })
    })
    .await
}

/// Takes a lease's GPU off the still running container through the worker (devices off, then
/// the slots released: see `jobs::gpus::detach`), the reason kept on the instance and audited.
pub(crate) fn detach(
    conn: &mut PgConnection,
    instance: &Instance,
    reason: &str,
    actor: &str,
    action: AuditAction,
) -> QueryResult<()> {
    InstanceUsage::set_detached(conn, instance.id, reason)?;
    // The lease is over, however it ended: its end's warning goes with it.
    ReclaimWarning::clear(conn, instance.id, LEASE_END)?;
    let job = Job::DetachGpus(Reclaimed {
        reason: reason.to_string(),
    });
    let step = Step::new(StepKind::DetachGpus, &instance.name, Some(instance.id));
    let audit = Audit {
        actor,
        action,
        object_kind: AuditObject::Instance,
        object: &instance.name,
        detail: json!({ "reason": reason }),
    };
    enqueue(conn, &job, None, &instance.name, &[step], Some(audit)).map(drop)
}

/// `GET /instances/{name}/gpu-lease`: the container's latest request or lease.
pub async fn show(ctl: &Controller, caller: Caller, name: String) -> ActionResult<WireLease> {
    ctl.db(move |conn| {
        let instance = find(conn, &caller, &name)?;
        let lease = GpuLease::latest_of(conn, instance.id)?.ok_or_else(|| {
            ActionError::NotFound(format!("a GPU lease or request of instance {name}"))
        })?;
        Ok(view(conn, &lease)?)
    })
    .await
}

/// The container page's part: `None` outside an on-demand course; else its open request or
/// lease, if any.
pub async fn page(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<Option<Option<WireLease>>> {
    ctl.db(move |conn| {
        let instance = find(conn, &caller, &name)?;
        let Some(course_id) = instance.course_id else {
            return Ok(None);
        };
        if CourseGpuMode::on_demand(conn, course_id)?.is_none() {
            return Ok(None);
        }
        let lease = GpuLease::latest_of(conn, instance.id)?;
        Ok(Some(match lease {
            Some(l) => Some(view(conn, &l)?),
            None => None,
        }))
    })
    .await
}

/// `GET /gpu-leases`: the open requests and leases the caller may see (a student their own,
/// an instructor their courses', an admin all), queued ones in their nodes' order.
pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireLease>> {
    ctl.db_as(bearer, |conn, caller| {
        let mut out = Vec::new();
        // Each node's queue read once for the whole list, not once a queued request.
        let mut queues = std::collections::HashMap::new();
        for state in [LeaseState::Active, LeaseState::Queued] {
            for lease in GpuLease::open(conn, state)? {
                let visible = caller.is_admin()
                    || lease.user_id == caller.user.id
                    || teaches(conn, &caller, lease.course_id)?;
                if visible {
                    out.push(view_in(conn, &lease, &mut queues)?);
                }
            }
        }
        out.sort_by_key(|l| (l.node.clone(), l.state != LeaseState::Active, l.place));
        Ok(out)
    })
    .await
}

/// A lease as the API shows it; a queued one with its place and why.
pub fn view(conn: &mut PgConnection, lease: &GpuLease) -> QueryResult<WireLease> {
    view_in(conn, lease, &mut std::collections::HashMap::new())
}

/// [`view`], with the node queues a list has read so far (by node id).
fn view_in(
    conn: &mut PgConnection,
    lease: &GpuLease,
    queues: &mut std::collections::HashMap<i64, queue::NodeQueue>,
) -> QueryResult<WireLease> {
    let names = LeaseNames::of(conn, lease)?;
    let place = match (lease.state, lease.node_id) {
        (LeaseState::Queued, Some(node_id)) => {
            let queue = match queues.entry(node_id) {
                std::collections::hash_map::Entry::Occupied(known) => known.into_mut(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(queue::NodeQueue::read(conn, node_id)?)
                }
            };
            queue.place_of(lease.id)
        }
        _ => None,
    };
    Ok(WireLease {
        id: lease.id,
        instance: names.instance,
        username: names.username,
        course: names.course,
        node: names.node,
        gpu: names.gpu,
        hours: GpuHours(lease.hours),
        state: lease.state,
        requested_at: lease.requested_at,
        granted_at: lease.granted_at,
        ends_at: lease.ends_at,
        ended_at: lease.ended_at,
        end_reason: lease.end_reason.clone(),
        place: place.as_ref().map(|p| p.place),
        why: place.as_ref().map(|p| p.why.clone()),
        used_hours: place.map(|p| GpuHours(p.used_hours)),
    })
}
