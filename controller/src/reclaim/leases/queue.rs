//! The queue for a node's GPUs, fair share: when a GPU frees, the queued request of a batch job
//! whose priority its course's staff raised goes first, then that of the student with the fewest
//! GPU hours this budget period (allocated time, as budgets count it; the
//! course's `budget_period`, a week where it has no budget) goes first, then the earliest
//! request. [`pass`] runs in the reclaim pass's transaction (one controller at a time, under its
//! advisory lock): leases whose end has come (and was warned) are ended and their GPUs detached, leases whose
//! container stopped or whose GPU was taken are ended, then each node's queue is granted in
//! order while its GPUs have room. A request waits for the one before it: nobody overtakes a
//! student with fewer hours, even where a later request would fit.

use std::cmp::Ordering;
use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use cohort_proto::api::gpu_leases::LeaseState;
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use crate::db::enums::{AuditAction, AuditObject, StepKind};
use crate::db::models::batch_job::BatchJob;
use crate::db::models::course::Course;
use crate::db::models::course_budget::{used_seconds_by_user, CourseBudget};
use crate::db::models::course_reclaim::{CourseReclaim, DEFAULT_WARN_MINUTES};
use crate::db::models::gpu_lease::{first_gpu_held, GpuLease};
use crate::db::models::instance::Instance;
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::node::Node;
use crate::db::models::reclaim_warning::{ReclaimWarning, LEASE_END};
use crate::db::queries::{capacity, coordination};
use crate::jobs::payload::{Job, Leased};
use crate::jobs::{enqueue, Audit, Step};
use crate::reclaim::budget::{hours, period_start, period_words, Notice};
use crate::reclaim::warning::{self, Gate};

/// Who the audit log names for the pass's ends and grants.
pub const ACTOR: &str = "gpu-lease";

/// A queued request's place on its node and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Place {
    /// 1: next.
    pub place: u32,
    pub used_hours: f64,
    pub why: String,
}

/// Where a course's fair-share period starts, and the period's words.
fn period_of(
    conn: &mut PgConnection,
    course_id: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> QueryResult<(chrono::DateTime<chrono::Utc>, &'static str)> {
    let course = Course::find(conn, course_id)?;
    let period = CourseBudget::of(conn, course_id)?
        .map(|b| b.budget_period)
        .unwrap_or_else(|| "week".into());
    Ok((
        period_start(&period, now, course.created_at),
        period_words(&period),
    ))
}

/// Node `node_id`'s queued requests in fair-share order, each with its student's hours. A few
/// queries whatever the queue's length (each course's period and hours read once): the jobs'
/// pass orders every node's queue each time it runs.
pub fn ordered(
    conn: &mut PgConnection,
    node_id: i64,
) -> QueryResult<Vec<(GpuLease, f64, &'static str)>> {
    let leases: Vec<GpuLease> = GpuLease::open(conn, LeaseState::Queued)?
        .into_iter()
        .filter(|l| l.node_id == Some(node_id))
        .collect();
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let now = coordination::clock(conn)?;
    let mut courses: HashMap<i64, (HashMap<i64, f64>, &'static str)> = HashMap::new();
    for lease in &leases {
        if let Entry::Vacant(slot) = courses.entry(lease.course_id) {
            let (start, words) = period_of(conn, lease.course_id, now)?;
            slot.insert((used_seconds_by_user(conn, lease.course_id, start)?, words));
        }
    }
    let ids: Vec<i64> = leases.iter().map(|l| l.id).collect();
    let priorities = BatchJob::priorities_of_leases(conn, &ids)?;
    let mut queued: Vec<(i32, GpuLease, f64, &'static str)> = leases
        .into_iter()
        .map(|lease| {
            let (used, words) = &courses[&lease.course_id];
            let hours = used.get(&lease.user_id).copied().unwrap_or(0.0) / 3600.0;
            // A batch job's priority, raised by its course's staff, goes before fair share.
            let priority = priorities.get(&lease.id).copied().unwrap_or(0);
            (priority, lease, hours, *words)
        })
        .collect();
    queued.sort_by(|(pa, a, ua, _), (pb, b, ub, _)| {
        pb.cmp(pa)
            .then(ua.partial_cmp(ub).unwrap_or(Ordering::Equal))
            .then(a.requested_at.cmp(&b.requested_at))
            .then(a.id.cmp(&b.id))
    });
    Ok(queued.into_iter().map(|(_, l, u, w)| (l, u, w)).collect())
}

/// One node's queue as read once, for the views of many requests (a list of waiting jobs asks
/// for each one's place: one read of the queue, not one a job).
pub struct NodeQueue {
    order: Vec<(GpuLease, f64, &'static str)>,
    /// Why no GPU can work on the node, if none can.
    missing: Option<String>,
}

impl NodeQueue {
    pub fn read(conn: &mut PgConnection, node_id: i64) -> QueryResult<NodeQueue> {
        Ok(NodeQueue {
            order: ordered(conn, node_id)?,
            missing: no_working_gpu(conn, node_id)?,
        })
    }

    /// Lease `lease_id`'s place and why; `None` when it is not queued here.
    pub fn place_of(&self, lease_id: i64) -> Option<Place> {
        let at = self.order.iter().position(|(l, _, _)| l.id == lease_id)?;
        let (_, used, when) = self.order[at];
        let ahead = at;
        let mut why = if ahead == 0 {
            format!(
                "first in line ({} GPU hours used {when}); waiting for a GPU on its node to free",
                hours(used)
            )
        } else {
            format!(
                "{ahead} ahead with fewer GPU hours {when} or asked earlier (fair share: fewest \
                 hours first, then the earliest request); {} GPU hours used {when}",
                hours(used)
            )
        };
        // Queued where no GPU can work (none there, or no runtime): the request says so.
        if let Some(missing) = &self.missing {
            why.push_str(&format!("; {missing}"));
        }
        Some(Place {
            place: at as u32 + 1,
            used_hours: used,
            why,
        })
    }
}

/// Why node `node_id` cannot give a container a GPU that works, if it cannot: no NVIDIA
/// container runtime (a GPU attached there would come without its driver's libraries; placement
/// knows this for pinned GPUs), or no GPU present. Requests there wait, saying so.
fn no_working_gpu(conn: &mut PgConnection, node_id: i64) -> QueryResult<Option<String>> {
    let node = Node::find(conn, node_id)?;
    if !node.nvidia_runtime {
        return Ok(Some(format!(
            "node {} has no NVIDIA container runtime (nvidia-container-cli), so an attached GPU \
             would have no driver: no GPU is given there until an admin installs it",
            node.name
        )));
    }
    if capacity::present_gpus(conn, [node_id])?.is_empty() {
        return Ok(Some(format!("node {} has no GPU", node.name)));
    }
    Ok(None)
}

/// Grants node `node_id`'s queued requests in order while its GPUs have room; returns how many.
/// A node that lost its runtime or its GPUs since they queued grants none: they wait.
pub fn grant_on_node(
    conn: &mut PgConnection,
    node_id: i64,
    hour_s: u64,
    actor: &str,
) -> QueryResult<usize> {
    let mut granted = 0;
    if no_working_gpu(conn, node_id)?.is_some() {
        return Ok(granted);
    }
    for (lease, _, _) in ordered(conn, node_id)? {
        let instance = Instance::find(conn, lease.instance_id)?;
        // A stopped or moved container waits without holding up those behind it.
        if instance.desired_state != DesiredState::Running || instance.node_id != Some(node_id) {
            continue;
        }
        let need = i64::from(Course::find(conn, lease.course_id)?.gpus.max(1));
        // All or none, in a savepoint, under the lock placement takes on the node's row.
        let took = conn.transaction(|conn| {
            capacity::lock_node(conn, node_id)?;
            let took = capacity::take_gpu_slots(conn, &instance, node_id, need)?;
            if (took as i64) < need {
                return Err(diesel::result::Error::RollbackTransaction);
            }
            Ok(took)
        });
        match took {
            Ok(_) => {}
            Err(diesel::result::Error::RollbackTransaction) => break,
            Err(e) => return Err(e),
        }
        let Some(gpu_id) = first_gpu_held(conn, instance.id)? else {
            break;
        };
        GpuLease::activate(conn, lease.id, node_id, gpu_id, hour_s)?;
        InstanceUsage::clear_detached(conn, instance.id)?;
        let job = Job::AttachGpus(Leased { lease: lease.id });
        let step = Step::new(StepKind::AttachGpus, &instance.name, Some(instance.id));
        let audit = Audit {
            actor,
            action: AuditAction::AttachGpus,
            object_kind: AuditObject::Instance,
            object: &instance.name,
            detail: json!({"lease": lease.id, "hours": lease.hours}),
        };
        enqueue(conn, &job, None, &instance.name, &[step], Some(audit))?;
        tracing::info!(instance = %instance.name, lease = lease.id, "GPU lease granted");
        granted += 1;
    }
    Ok(granted)
}

/// The leases' part of a reclaim pass, in its transaction: ends what is due (a student's lease
/// once its end was warned, through [`warning::gate`]; a batch job's at its end, the job says
/// so), then grants what fits; returns how many leases it ended or granted.
pub fn pass(
    conn: &mut PgConnection,
    hour_s: u64,
    minute: Duration,
    now: DateTime<Utc>,
    notices: &mut Vec<Notice>,
) -> QueryResult<usize> {
    let mut acted = 0;
    let policies = CourseReclaim::all(conn)?;
    let longest_warn = policies
        .iter()
        .map(|p| p.warn_minutes)
        .chain([DEFAULT_WARN_MINUTES])
        .max()
        .unwrap_or(DEFAULT_WARN_MINUTES);
    let within = minute.num_seconds() * i64::from(longest_warn);
    for lease in GpuLease::ending_within(conn, within)? {
        let instance = Instance::find(conn, lease.instance_id)?;
        let Some(ends_at) = lease.ends_at else {
            continue;
        };
        if BatchJob::of_lease(conn, lease.id)?.is_none() {
            let warn_minutes = policies
                .iter()
                .find(|p| p.course_id == lease.course_id)
                .map_or(DEFAULT_WARN_MINUTES, |p| p.warn_minutes);
            let length = lease.hours * hour_s as f64 / minute.num_seconds().max(1) as f64;
            let warn = minute * warning::ahead(warn_minutes, length as i32);
            let code = Course::find(conn, lease.course_id)?.code;
            let gate = warning::gate(
                conn, &instance, LEASE_END, "detach", ends_at, warn, now, &code, notices,
            )?;
            if gate != Gate::Act {
                continue;
            }
        } else if ends_at > now {
            continue;
        }
        let reason = format!(
            "GPU lease of {} hours ended at {}",
            hours(lease.hours),
            ends_at.format("%Y-%m-%d %H:%M:%S UTC")
        );
        GpuLease::close(conn, lease.id, LeaseState::Ended, &reason)?;
        super::detach(conn, &instance, &reason, ACTOR, AuditAction::DetachGpus)?;
        acted += 1;
    }
    for lease in GpuLease::open(conn, LeaseState::Active)? {
        let instance = Instance::find(conn, lease.instance_id)?;
        if instance.desired_state != DesiredState::Running {
            let reason = "GPU lease ended: the container was stopped";
            GpuLease::close(conn, lease.id, LeaseState::Ended, reason)?;
            super::detach(conn, &instance, reason, ACTOR, AuditAction::DetachGpus)?;
            acted += 1;
        } else if capacity::gpu_slots_held(conn, instance.id)? == 0 {
            // Another reclaim (idle, budget) took the GPU: the lease ends with its reason.
            let taken = InstanceUsage::detach_reason_of(conn, instance.id)?
                .unwrap_or_else(|| "given back".into());
            let reason = format!("GPU lease ended: {taken}");
            GpuLease::close(conn, lease.id, LeaseState::Ended, &reason)?;
            ReclaimWarning::clear(conn, instance.id, LEASE_END)?;
            acted += 1;
        }
    }
    let mut nodes: Vec<i64> = GpuLease::open(conn, LeaseState::Queued)?
        .iter()
        .filter_map(|l| l.node_id)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    for node_id in nodes {
        acted += grant_on_node(conn, node_id, hour_s, ACTOR)?;
    }
    Ok(acted)
}
