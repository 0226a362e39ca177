//! Provisioning a course: one operation whose items make each student's container. Idempotent:
//! it asks each node which of the course's containers it really has (one list call per node),
//! and makes only what is missing (a row with no container, or no row yet) or starts what is
//! stopped; what is fine is left alone. Quotas are checked before anything is created. One
//! provision of a course at a time: its decision is taken under the course's row lock, and a
//! second while the first is unfinished is refused (409, naming the first), so a double-click
//! can never make a student's container twice.

use std::collections::{HashMap, HashSet};

use cohort_proto::api::courses::CourseState;
use cohort_proto::api::instances::{DesiredState, GpuShare, ObservedState, PlacementStrategy};
use cohort_proto::api::operations::Operation as WireOperation;
use cohort_proto::api::operations::{OperationKind, OperationStatus};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::{course_instances, writable};
use crate::accounts::auth::Caller;
use crate::agent_client::observed;
use crate::app::config::PlacementConfig;
use crate::app::state::Controller;
use crate::courses::naming;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::course::Course;
use crate::db::models::enrollment::{Enrolled, Enrollment};
use crate::db::models::instance::{Instance, NewInstance};
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
use crate::error::{ActionError, ActionResult};
use crate::jobs::{enqueue, payload, Audit, Step, StepKind};
use crate::placement::home_size;
use crate::placement::{self, Placement};
use crate::views;

/// Refuses a provision (or a change of the course's limits) that would take the course past its
/// admin-set quota.
pub(super) fn check_quota(course: &Course, students: usize) -> ActionResult<()> {
    let n = students as i64;
    if let Some(max) = course.quota_students {
        if n > i64::from(max) {
            return Err(ActionError::conflict(
                Some("quota.max_students"),
                format!(
                    "course {} has {n} students; its quota allows {max}",
                    course.code
                ),
            ));
        }
    }
    if let Some(max) = course.quota_gpus {
        let want = n * i64::from(course.gpus);
        if want > i64::from(max) {
            return Err(ActionError::conflict(
                Some("quota.max_gpus"),
                format!(
                    "course {} needs {want} GPUs; its quota allows {max}",
                    course.code
                ),
            ));
        }
    }
    if let Some(max) = course.quota_memory_mib {
        let want = n * course.memory_mib;
        if want > max {
            return Err(ActionError::conflict(
                Some("quota.max_memory_mib"),
                format!(
                    "course {} needs {want} MiB of memory; its quota allows {max}",
                    course.code
                ),
            ));
        }
    }
    Ok(())
}

/// What one student's container of `course` needs of a node.
pub(super) fn need<'a>(
    conn: &mut PgConnection,
    course: &'a Course,
    config: &PlacementConfig,
) -> QueryResult<crate::placement::feasible::Need<'a>> {
    Ok(crate::placement::feasible::Need {
        cpu: course.cpu,
        memory_mib: course.memory_mib,
        // The root disk and the home volume (with its snapshots), both on the node's pool.
        disk_gib: course.disk_gib + home_size::course_reserved_gib(conn, course, config)?,
        // On demand, a container is made without a GPU: any node may hold it.
        gpus: crate::reclaim::leases::gpus_at_creation(conn, course)?,
        gpu_model: course.gpu_model.as_deref(),
        exclusive: course.gpu_share == GpuShare::Exclusive,
    })
}

/// What the nodes holding the course's containers report: name -> LXD status. Containers on a
/// node that cannot be asked (or does not answer within [`OBSERVE_WITHIN`]) are absent from the
/// map and listed in the second set, so they are left alone rather than made twice. The request
/// only reads the nodes, all at once, so that a provision makes only what is missing and its
/// items say so at once (the poller's view can be a poll old: a container deleted behind
/// Cohort's back a moment ago is made again); every change on a node is a step the worker runs.
async fn observe(
    ctl: &Controller,
    existing: &[Instance],
) -> (HashMap<String, String>, HashSet<i64>) {
    let node_ids: HashSet<i64> = existing.iter().filter_map(|i| i.node_id).collect();
    let asks = node_ids.into_iter().map(|node_id| async move {
        let ask = async {
            let (_, agent) = ctl.agent_by_node_id(node_id).await.ok()?;
            agent.list_instances().await.ok()
        };
        let listed = tokio::time::timeout(OBSERVE_WITHIN, ask)
            .await
            .ok()
            .flatten();
        (node_id, listed)
    });
    let mut seen = HashMap::new();
    let mut unreachable = HashSet::new();
    for (node_id, listed) in futures_util::future::join_all(asks).await {
        match listed {
            Some(list) => seen.extend(list.into_iter().map(|i| (i.name, i.status))),
            None => {
                unreachable.insert(node_id);
            }
        }
    }
    (seen, unreachable)
}

/// How long a provision waits for one node's list of containers.
const OBSERVE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn provision(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<WireOperation> {
    caller.require(Role::Instructor)?;
    let (course, students, existing) = {
        let (caller, code) = (caller.clone(), code.clone());
        ctl.db(move |conn| {
            let course = writable(conn, &caller, &code)?;
            // A torn-down course comes back (its kept home volumes with it) by provisioning it
            // again.
            if course.state == CourseState::TornDown {
                Course::set_state(conn, course.id, CourseState::Active)?;
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::Reactivate,
                    AuditObject::Course,
                    &code,
                    serde_json::json!({}),
                )?;
            } else if course.state != CourseState::Active {
                return Err(ActionError::conflict(
                    Some("state"),
                    format!(
                        "course {code} is {}; only an active course is provisioned",
                        course.state
                    ),
                ));
            }
            let students = Enrollment::students(conn, course.id)?;
            check_quota(&course, students.len())?;
            let existing = course_instances(conn, course.id)?;
            Ok((course, students, existing))
        })
        .await?
    };
    let (seen, unreachable) = observe(ctl, &existing).await;
    let placement_config = ctl.config.placement.clone();
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            Course::lock(conn, course.id)?; // one provision of the course decides at a time
            if let Some(running) =
                Operation::unfinished(conn, OperationKind::ProvisionCourse, &course.code)?
            {
                return Err(already_provisioning(&course.code, running.id));
            }
            // Instances made since this request read the course (by a provision that has
            // finished meanwhile) are left alone: this request has not observed them.
            let read_before: HashSet<i64> = existing.iter().map(|i| i.id).collect();
            let made_meanwhile: HashSet<i64> = course_instances(conn, course.id)?
                .into_iter()
                .filter(|i| !read_before.contains(&i.id))
                .map(|i| i.owner_id)
                .collect();
            // Each item with where its instance is, known now: placed by this transaction, or
            // on the node it was made on.
            let node_names: HashMap<i64, String> = crate::db::models::node::Node::list(conn)?
                .into_iter()
                .map(|n| (n.id, n.name))
                .collect();
            let at = |placed: Option<Placement>| placed.map(|p| (p.node_name, p.ssh_port));
            let mut steps: Vec<Planned> = Vec::new();
            // Students whose instance could not be made, and why: their items fail, the rest
            // of the class is provisioned.
            let mut refused: Vec<(String, String)> = Vec::new();
            let makes_new = students.iter().any(|s| {
                !existing.iter().any(|i| i.owner_id == s.user.id)
                    && !made_meanwhile.contains(&s.user.id)
            });
            if makes_new {
                let need = need(conn, &course, &placement_config)?;
                crate::placement::feasible::check(
                    conn,
                    &need,
                    None,
                    &placement_config,
                    crate::placement::feasible::COURSE_FIELDS,
                )?;
            }
            // The students with no instance yet are placed together, as a class, after the
            // loop; their items keep their places in the roster's order.
            let mut slots: Vec<Option<Planned>> = Vec::new();
            let mut new_students: Vec<&Enrolled> = Vec::new();
            for student in &students {
                match existing.iter().find(|i| i.owner_id == student.user.id) {
                    None if made_meanwhile.contains(&student.user.id) => {}
                    None => {
                        new_students.push(student);
                        slots.push(None);
                    }
                    Some(i) if i.desired_state == DesiredState::Deleted => {}
                    Some(i) if i.node_id.is_none() && i.observed_state == ObservedState::Error => {
                        // Its create failed for good earlier: try it again.
                        Instance::requeue(conn, i.id)?;
                        let queued = Instance::find(conn, i.id)?;
                        let placed = placement::place(conn, &queued, None, &placement_config)?;
                        slots.push(Some(Planned::new(
                            i.name.clone(),
                            StepKind::Create,
                            i.id,
                            at(placed),
                        )));
                    }
                    Some(i) if i.node_id.is_some_and(|n| unreachable.contains(&n)) => {}
                    Some(i) => {
                        let action = match seen.get(&i.name).map(|s| observed(s)) {
                            None => StepKind::Create,
                            Some(ObservedState::Running) => continue,
                            Some(_) => StepKind::Start,
                        };
                        let node = i.node_id.and_then(|n| node_names.get(&n).cloned());
                        let placed = node.zip(i.ssh_port);
                        slots.push(Some(Planned::new(i.name.clone(), action, i.id, placed)));
                    }
                }
            }
            let mut placed_new =
                insert_class(conn, &course, &new_students, &placement_config)?.into_iter();
            for slot in slots {
                match slot.map(Ok).or_else(|| placed_new.next()) {
                    Some(Ok(planned)) => steps.push(planned),
                    Some(Err(refusal)) => refused.push(refusal),
                    None => {}
                }
            }
            let step_refs: Vec<Step<'_>> = steps.iter().map(Planned::step).collect();
            let op = enqueue(
                conn,
                &payload::Job::ProvisionCourse(payload::OfCourse {
                    course: course.code.clone(),
                }),
                Some(caller.user.id),
                &course.code,
                &step_refs,
                Some(Audit {
                    actor: caller.name(),
                    action: AuditAction::Provision,
                    object_kind: AuditObject::Course,
                    object: &course.code,
                    detail: json!({ "items": steps.len(), "students": students.len(),
                       "refused": refused.iter().map(|(name, _)| name).collect::<Vec<_>>()}),
                }),
            )?;
            for (position, (name, why)) in refused.iter().enumerate() {
                let position = (steps.len() + position) as i32;
                let step = Step::new(StepKind::Create, name, None);
                let item = OperationItem::insert(conn, op.id, position, &step)?;
                OperationItem::finish(conn, item.id, OperationStatus::Failure, Some(why))?;
            }
            Ok(views::operation(conn, &op)?)
        })
    })
    .await
}

/// The refusal of a provision while another of the same course is unfinished.
fn already_provisioning(code: &str, running: uuid::Uuid) -> ActionError {
    ActionError::conflict(
        Some("course"),
        format!(
            "course {code} is being provisioned already (operation {running}); wait for it, \
             then provision again for anything it did not cover"
        ),
    )
}

/// The unfinished provision of course `code`, if one is under way and the caller may see the
/// course (the portal sends a second click to the first one's progress).
pub async fn running(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Option<uuid::Uuid>> {
    ctl.db(move |conn| {
        let course = writable(conn, &caller, &code)?;
        Ok(
            Operation::unfinished(conn, OperationKind::ProvisionCourse, &course.code)?
                .map(|op| op.id),
        )
    })
    .await
}

/// One item of a provision: the instance, its step, and where it is when that is known.
struct Planned {
    name: String,
    action: StepKind,
    id: i64,
    at: Option<(String, i32)>,
}

impl Planned {
    fn new(name: String, action: StepKind, id: i64, at: Option<(String, i32)>) -> Self {
        Planned {
            name,
            action,
            id,
            at,
        }
    }

    fn step(&self) -> Step<'_> {
        let at = self.at.as_ref().map(|(node, port)| (node.as_str(), *port));
        Step::new(self.action, &self.name, Some(self.id)).placed(at)
    }
}

/// The instances of `students`, none of whom has one yet, placed together as a class
/// ([`placement::insert_class`]): each student's `create` item, or, when both names the student
/// could have are taken by instances that are not the course's, the name and why (the student's
/// item fails, not the provision). In the order given.
fn insert_class(
    conn: &mut PgConnection,
    course: &Course,
    students: &[&Enrolled],
    placement_config: &PlacementConfig,
) -> ActionResult<Vec<Result<Planned, (String, String)>>> {
    if students.is_empty() {
        return Ok(Vec::new());
    }
    let image_id = image_of(course)?;
    let candidates: Vec<[String; 2]> = students.iter().map(|s| names_for(course, s)).collect();
    let taken = Instance::taken_names(conn, candidates.iter().flatten())?;
    let names: Vec<Result<String, (String, String)>> = candidates
        .iter()
        .map(|both| {
            both.iter()
                .find(|name| !taken.contains(*name))
                .cloned()
                .ok_or_else(|| refusal(course, both))
        })
        .collect();
    let home_gib = home_size::course_reserved_gib(conn, course, placement_config)? as i32;
    let gpus = crate::reclaim::leases::gpus_at_creation(conn, course)?;
    let news: Vec<NewInstance<'_>> = students
        .iter()
        .zip(&names)
        .filter_map(|(student, name)| {
            let name = name.as_ref().ok()?;
            let mut new = new_instance(course, student, name, image_id, home_gib);
            new.gpu_count = gpus;
            Some(new)
        })
        .collect();
    // In a savepoint: a name another transaction took meanwhile rolls back the class alone, and
    // its students are then placed one by one, each taking its other name if it must.
    let placed =
        match conn.transaction(|conn| placement::insert_class(conn, &news, placement_config)) {
            Ok(placed) => placed,
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                ref info,
            )) if info.constraint_name() == Some("instances_name_key") => {
                return students
                    .iter()
                    .map(|student| insert_instance(conn, course, student, placement_config))
                    .collect();
            }
            Err(e) => return Err(e.into()),
        };
    let mut placed = placed.into_iter();
    Ok(names
        .into_iter()
        .map(|name| {
            let name = name?;
            let (id, at) = placed.next().expect("one placement for each named student");
            let at = at.map(|p| (p.node_name, p.ssh_port));
            Ok(Planned::new(name, StepKind::Create, id, at))
        })
        .collect())
}

/// A student's instance of `course`, placed when a node can hold it, queued otherwise: its
/// `create` item; or, when both names the student could have are taken by instances that are not the
/// course's, the name and why (the student's item fails, not the provision).
fn insert_instance(
    conn: &mut PgConnection,
    course: &Course,
    student: &Enrolled,
    placement_config: &PlacementConfig,
) -> ActionResult<Result<Planned, (String, String)>> {
    let image_id = image_of(course)?;
    let names = names_for(course, student);
    for name in &names {
        if Instance::by_name(conn, name)?.is_some() {
            continue;
        }
        let home_gib = home_size::course_reserved_gib(conn, course, placement_config)? as i32;
        let mut new = new_instance(course, student, name, image_id, home_gib);
        new.gpu_count = crate::reclaim::leases::gpus_at_creation(conn, course)?;
        // In a savepoint: a name taken meanwhile by another transaction rolls back this insert
        // alone, not the provision.
        match conn.transaction(|conn| placement::insert(conn, &new, None, placement_config)) {
            Ok((id, placed)) => {
                let at = placed.map(|p| (p.node_name, p.ssh_port));
                return Ok(Ok(Planned::new(name.clone(), StepKind::Create, id, at)));
            }
            Err(diesel::result::Error::DatabaseError(
                diesel::result::DatabaseErrorKind::UniqueViolation,
                ref info,
            )) if info.constraint_name() == Some("instances_name_key") => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Err(refusal(course, &names)))
}

/// The course's image, which every instance of it is made from.
fn image_of(course: &Course) -> ActionResult<i64> {
    course.image_id.ok_or_else(|| {
        ActionError::conflict(
            Some("image"),
            format!("course {} has no image", course.code),
        )
    })
}

/// The two names a student's instance of `course` may have, the usual one first.
fn names_for(course: &Course, student: &Enrolled) -> [String; 2] {
    let username = &student.user.username;
    [
        naming::instance_name(&course.code, username),
        naming::instance_name_around(&course.code, username),
    ]
}

/// Why a student has no instance: both its names are taken.
fn refusal(course: &Course, names: &[String; 2]) -> (String, String) {
    (
        names[0].clone(),
        format!(
            "instance names {} and {} are both taken by instances that are not course {}'s; \
             an admin can delete them",
            names[0], names[1], course.code
        ),
    )
}

/// The row of `student`'s instance of `course`, named `name`, reserving `home_gib` for its home
/// ([`home_size::course_reserved_gib`]).
fn new_instance<'a>(
    course: &'a Course,
    student: &Enrolled,
    name: &'a str,
    image_id: i64,
    home_gib: i32,
) -> NewInstance<'a> {
    NewInstance {
        name,
        owner_id: student.user.id,
        course_id: Some(course.id),
        image_id,
        desired_state: DesiredState::Running,
        observed_state: ObservedState::Queued,
        cpu: course.cpu,
        memory_mib: course.memory_mib,
        disk_gib: course.disk_gib,
        gpu_count: course.gpus,
        gpu_model: course.gpu_model.as_deref(),
        gpu_share: course.gpu_share,
        gpu_share_count: course.gpu_share_count,
        home_gib,
        strategy: PlacementStrategy::Spread,
        priority: 0,
        config: json!({}),
    }
}
