//! Batch jobs (issue 44): a student's command run to completion in their own container, as
//! them, in their home (or a directory under it), once its turn comes. A job with GPUs takes a
//! GPU lease on the container's node when its student is under the course's running limit:
//! the lease queue ([`crate::reclaim::leases::queue`]: a priority the course's staff raised,
//! then fair share, fewest GPU hours this period first, then the earliest) decides who gets the GPU; the GPU is attached for
//! the job and given back when it ends, fails, is cancelled or reaches its limit. A job with
//! no GPUs runs at once (within the running limit).
//!
//! The job is a row (`batch_jobs`); its process lives in the container under a session of its
//! own, its pid, log and exit code in files under `~/.cohort/jobs/`, so neither a controller nor
//! an agent restart touches it: [`runner`] reads its state back through the node's agent every
//! pass. [`queue`] makes the decisions in one transaction; [`run`] is the loop.

use cohort_proto::api::batch_jobs::{Job as WireJob, JobLog, JobPriority, JobState, SubmitJob};
use cohort_proto::api::courses::GpuHours;
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::courses::course::{teaches, writable};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::batch_job::{BatchJob, CourseJobLimits, JobLabels, NewJob};
use crate::db::models::course::Course;
use crate::db::models::gpu_lease::CourseGpuMode;
use crate::db::models::instance::Instance;
use crate::db::models::user::User;
use crate::db::queries::capacity;
use crate::error::{ActionError, ActionResult};
use crate::instances::manage::find;
use crate::reclaim::leases::{DEFAULT_LEASE_HOURS, MAX_LEASE_HOURS};

pub mod queue;
pub mod runner;

pub use runner::{run, LOOP};

/// Most bytes one read of a job's log answers.
pub const LOG_CHUNK: u64 = 256 * 1024;

/// A job's log inside its container, as the API shows it.
pub fn log_path(id: i64) -> String {
    format!("~/.cohort/jobs/{id}.log")
}

/// The workdir as given, checked: under the home of `username` (relative to it, or absolute
/// under `/home/<username>`), without `..`; answers it relative to the home.
fn check_workdir(workdir: &str, username: &str) -> ActionResult<String> {
    let bad = |why: &str| Err(ActionError::invalid("workdir", why.to_string()));
    if workdir.contains('\0') {
        return bad("must not contain a NUL character");
    }
    let home = format!("/home/{username}");
    let rel = if let Some(abs) = workdir.strip_prefix('/') {
        let abs = format!("/{}", abs.trim_end_matches('/'));
        if abs == home {
            String::new()
        } else if let Some(rest) = abs.strip_prefix(&format!("{home}/")) {
            rest.to_string()
        } else {
            return bad(&format!(
                "must be in the home directory ({home}); {workdir} is outside it"
            ));
        }
    } else {
        workdir.trim_end_matches('/').to_string()
    };
    if rel.split('/').any(|part| part == "..") {
        return bad("must not contain '..': a job runs in the home directory or under it");
    }
    Ok(rel)
}

/// An environment variable's name a job may set: a shell name.
fn check_environment(env: &std::collections::BTreeMap<String, String>) -> ActionResult<()> {
    for (name, value) in env {
        let field = format!("environment.{name}");
        let shell_name = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !shell_name {
            return Err(ActionError::invalid(
                &field,
                "a variable name is letters, digits and '_', not starting with a digit",
            ));
        }
        if value.contains('\0') {
            return Err(ActionError::invalid(
                &field,
                "must not contain a NUL character",
            ));
        }
    }
    Ok(())
}

/// `POST /jobs`: queues the job (nothing is made on refusal); the next pass starts it when its
/// turn comes.
pub async fn submit(ctl: &Controller, caller: Caller, req: SubmitJob) -> ActionResult<WireJob> {
    cohort_proto::validate::exec_request(&req.command, &Default::default(), None)
        .map_err(|e| ActionError::invalid(&e.field, e.message))?;
    check_environment(&req.environment)?;
    if let Some(h) = req.hours {
        if !(h.0.is_finite() && h.0 > 0.0 && h.0 <= MAX_LEASE_HOURS) {
            return Err(ActionError::invalid(
                "hours",
                format!("must be more than 0 and at most {MAX_LEASE_HOURS} hours (a week)"),
            ));
        }
    }
    let gpus = req.gpus.unwrap_or(0);
    let job = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let instance = find(conn, &caller, &req.instance)?;
                let name = instance.name.clone();
                if instance.owner_id != caller.user.id && !caller.is_admin() {
                    return Err(ActionError::Forbidden(format!(
                        "instance {name} is not yours: a job runs as its container's owner, who \
                         submits it"
                    )));
                }
                let owner = User::find(conn, instance.owner_id)?;
                let workdir = match req.workdir.as_deref() {
                    Some(w) => Some(check_workdir(w, &owner.username)?),
                    None => None,
                };
                let (hours, max_hours) = hours_of(conn, &instance, gpus, req.hours)?;
                if hours > max_hours {
                    return Err(ActionError::invalid(
                        "hours",
                        format!(
                            "must be at most {max_hours} hours (the course's gpu_lease_max_hours)"
                        ),
                    ));
                }
                if instance.desired_state != DesiredState::Running {
                    return Err(ActionError::conflict(
                        None,
                        format!("instance {name} is not running: start it, then submit the job"),
                    ));
                }
                let Some(node_id) = instance.node_id else {
                    return Err(ActionError::conflict(
                        None,
                        format!("instance {name} is queued, not on a node yet"),
                    ));
                };
                let limits = CourseJobLimits::of(conn, instance.course_id)?;
                let (_, waiting) = BatchJob::counts(conn, instance.owner_id, instance.course_id)?;
                if waiting >= i64::from(limits.max_queued) {
                    return Err(ActionError::conflict(
                        Some("jobs"),
                        format!(
                            "{} already has {waiting} jobs waiting, the course's limit \
                             (max_queued {}): wait for one to start or cancel one",
                            owner.username, limits.max_queued
                        ),
                    ));
                }
                let row = BatchJob::insert(
                    conn,
                    &NewJob {
                        instance_id: instance.id,
                        user_id: instance.owner_id,
                        course_id: instance.course_id,
                        command: req.command.clone(),
                        workdir,
                        environment: json!(req.environment),
                        gpus: gpus as i32,
                        hours,
                        state: JobState::Queued,
                        node_id: Some(node_id),
                    },
                )?;
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::SubmitJob,
                    AuditObject::Instance,
                    &name,
                    json!({"job": row.id, "command": req.command, "gpus": gpus, "hours": hours}),
                )?;
                Ok(view(conn, &row)?)
            })
        })
        .await?;
    // Its turn may be now: the loop's next pass would start it anyway.
    runner::wake(ctl);
    Ok(job)
}

/// The job's hours (given, or the default) and the most it may ask for: a GPU job on demand
/// at most the course's `gpu_lease_max_hours`, any other a week. Refuses more GPUs than the
/// container can have.
fn hours_of(
    conn: &mut PgConnection,
    instance: &Instance,
    gpus: u32,
    asked: Option<GpuHours>,
) -> ActionResult<(f64, f64)> {
    let mut max = MAX_LEASE_HOURS;
    if gpus > 0 {
        let on_demand = match instance.course_id {
            Some(c) => CourseGpuMode::on_demand(conn, c)?,
            None => None,
        };
        let can_have = match (&on_demand, instance.course_id) {
            (Some(_), Some(c)) => i64::from(Course::find(conn, c)?.gpus.max(1)),
            _ => capacity::gpu_slots_held(conn, instance.id)?,
        };
        if i64::from(gpus) > can_have {
            let why = if on_demand.is_some() {
                format!("must be at most {can_have}: the GPUs the course leases to a container")
            } else if can_have == 0 {
                format!(
                    "must be 0: container {} has no GPU (its course pins none, and is not on \
                     demand)",
                    instance.name
                )
            } else {
                format!(
                    "must be at most {can_have}: the GPUs container {} holds",
                    instance.name
                )
            };
            return Err(ActionError::invalid("gpus", why));
        }
        if let Some(mode) = on_demand {
            max = mode.gpu_lease_max_hours;
        }
    }
    let hours = asked.map_or(DEFAULT_LEASE_HOURS.min(max), |h| h.0);
    Ok((hours, max))
}

/// The job if the caller may see it (its student, its course's staff, an admin), else 404.
fn visible(conn: &mut PgConnection, caller: &Caller, id: i64) -> ActionResult<BatchJob> {
    let job = BatchJob::find(conn, id)?;
    if let Some(job) = job {
        let sees = caller.is_admin()
            || job.user_id == caller.user.id
            || match job.course_id {
                Some(c) => teaches(conn, caller, c)?,
                None => false,
            };
        if sees {
            return Ok(job);
        }
    }
    Err(ActionError::NotFound(format!("job {id}")))
}

/// What `GET /jobs` may be narrowed to.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListFilter {
    pub course: Option<String>,
    pub user: Option<String>,
    pub state: Option<String>,
}

/// `GET /jobs`: the jobs the caller may see, newest first (the latest 1000), narrowed.
pub async fn list(
    ctl: &Controller,
    bearer: Bearer,
    filter: ListFilter,
) -> ActionResult<Vec<WireJob>> {
    let state = match filter.state.as_deref() {
        Some(s) => Some(s.parse::<JobState>().map_err(|_| {
            ActionError::invalid(
                "state",
                "must be queued, starting, running, unknown, succeeded, failed, cancelled or killed",
            )
        })?),
        None => None,
    };
    ctl.db_as(bearer, move |conn, caller| {
        let course_id = match filter.course.as_deref() {
            Some(code) => Some(
                Course::by_code(conn, code)?
                    .ok_or_else(|| ActionError::NotFound(format!("course {code}")))?
                    .id,
            ),
            None => None,
        };
        let user_id = match filter.user.as_deref() {
            Some(name) => Some(
                User::by_username(conn, name)?
                    .ok_or_else(|| ActionError::NotFound(format!("user {name}")))?
                    .id,
            ),
            None => None,
        };
        let mut shown = Vec::new();
        for job in BatchJob::recent(conn, 1000)? {
            if course_id.is_some_and(|c| job.course_id != Some(c))
                || user_id.is_some_and(|u| job.user_id != u)
                || state.is_some_and(|s| job.state != s)
            {
                continue;
            }
            let sees = caller.is_admin()
                || job.user_id == caller.user.id
                || match job.course_id {
                    Some(c) => teaches(conn, &caller, c)?,
                    None => false,
                };
            if sees {
                shown.push(job);
            }
        }
        Ok(views(conn, &shown)?)
    })
    .await
}

/// `GET /jobs/{id}`.
pub async fn show(ctl: &Controller, caller: Caller, id: i64) -> ActionResult<WireJob> {
    ctl.db(move |conn| {
        let job = visible(conn, &caller, id)?;
        Ok(view(conn, &job)?)
    })
    .await
}

/// `POST /jobs/{id}/cancel`: a waiting job ends at once (its lease request with it); a started
/// one is stopped by the next pass and ends `cancelled`. A job over already: 409.
pub async fn cancel(ctl: &Controller, caller: Caller, id: i64) -> ActionResult<WireJob> {
    let job = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let job = visible(conn, &caller, id)?;
                if job.state.is_final() {
                    return Err(ActionError::conflict(
                        Some("state"),
                        format!("job {id} is over already ({})", job.state),
                    ));
                }
                let who = caller.name();
                let reason = format!("cancelled by {who}");
                if job.state == JobState::Queued {
                    queue::end(conn, &job, JobState::Cancelled, None, &reason)?;
                } else {
                    BatchJob::ask_stop(conn, id, JobState::Cancelled, &reason)?;
                }
                let instance = Instance::find(conn, job.instance_id)?;
                audit::record(
                    conn,
                    who,
                    AuditAction::CancelJob,
                    AuditObject::Instance,
                    &instance.name,
                    json!({"job": id}),
                )?;
                let job = BatchJob::find(conn, id)?.unwrap_or(job);
                Ok(view(conn, &job)?)
            })
        })
        .await?;
    runner::wake(ctl);
    Ok(job)
}

/// `PUT /jobs/{id}/priority`: its course's staff or an admin moves a job up (or down) its
/// course's queue and its node's GPU queue; audited.
pub async fn set_priority(
    ctl: &Controller,
    caller: Caller,
    id: i64,
    req: JobPriority,
) -> ActionResult<WireJob> {
    if !(-100..=100).contains(&req.priority) {
        return Err(ActionError::invalid("priority", "must be from -100 to 100"));
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let job = visible(conn, &caller, id)?;
            let staff = caller.is_admin()
                || match job.course_id {
                    Some(c) => teaches(conn, &caller, c)?,
                    None => false,
                };
            if !staff {
                return Err(ActionError::Forbidden(format!(
                    "only job {id}'s course staff or an admin sets its priority"
                )));
            }
            BatchJob::set_priority(conn, id, req.priority)?;
            let instance = Instance::find(conn, job.instance_id)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetJobPriority,
                AuditObject::Instance,
                &instance.name,
                json!({"job": id, "priority": req.priority, "was": job.priority}),
            )?;
            let job = BatchJob::find(conn, id)?.unwrap_or(job);
            Ok(view(conn, &job)?)
        })
    })
    .await
}

/// `PUT /courses/{code}/job-limits`: each student's jobs running and waiting at once.
pub async fn set_limits(
    ctl: &Controller,
    caller: Caller,
    code: String,
    req: cohort_proto::api::courses::CourseJobLimits,
) -> ActionResult<cohort_proto::api::courses::CourseJobLimits> {
    if !(1..=100).contains(&req.max_running) {
        return Err(ActionError::invalid("max_running", "must be from 1 to 100"));
    }
    if !(0..=1000).contains(&req.max_queued) {
        return Err(ActionError::invalid("max_queued", "must be from 0 to 1000"));
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            CourseJobLimits::set(
                conn,
                &CourseJobLimits {
                    course_id: course.id,
                    max_running: req.max_running,
                    max_queued: req.max_queued,
                },
            )?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetJobLimits,
                AuditObject::Course,
                &code,
                json!({"max_running": req.max_running, "max_queued": req.max_queued}),
            )?;
            Ok(req)
        })
    })
    .await
}

/// `GET /jobs/{id}/log?offset=N`: up to [`LOG_CHUNK`] bytes of its log from `offset`, read
/// in the container through its node's agent.
pub async fn log(ctl: &Controller, caller: Caller, id: i64, offset: u64) -> ActionResult<JobLog> {
    let (job, instance, owner) = ctl
        .db(move |conn| {
            let job = visible(conn, &caller, id)?;
            let instance = Instance::find(conn, job.instance_id)?;
            let owner = User::find(conn, job.user_id)?;
            Ok((job, instance, owner))
        })
        .await?;
    let Some(node_id) = instance.node_id else {
        return Err(ActionError::conflict(
            None,
            format!(
                "instance {} is not on a node: its log cannot be read",
                instance.name
            ),
        ));
    };
    if instance.desired_state != DesiredState::Running {
        return Err(ActionError::conflict(
            None,
            format!(
                "instance {} is not running: its log is in {} there",
                instance.name,
                log_path(id)
            ),
        ));
    }
    let (node, agent) = ctl.agent_by_node_id(node_id).await?;
    let text = runner::read_log(agent.as_ref(), &instance.name, &owner.username, id, offset)
        .await
        .map_err(ActionError::on_node(&node.name))?;
    let read = text.len() as u64;
    Ok(JobLog {
        offset,
        next_offset: offset + read,
        text: String::from_utf8_lossy(&text).into_owned(),
        done: job.state.is_final(),
    })
}

/// A job as the API shows it; a waiting one with its place and why.
pub fn view(conn: &mut PgConnection, job: &BatchJob) -> QueryResult<WireJob> {
    let mut views = views(conn, std::slice::from_ref(job))?;
    Ok(views.remove(0))
}

/// Jobs as the API shows them, in the order given. What they share (names, each node's GPU
/// queue, the open jobs, limits) is read once for all of them: a list of 500 waiting jobs is a
/// few queries, not a few thousand.
pub fn views(conn: &mut PgConnection, jobs: &[BatchJob]) -> QueryResult<Vec<WireJob>> {
    let labels = JobLabels::of(conn, jobs)?;
    let mut seen = queue::Seen::default();
    jobs.iter()
        .map(|job| labelled(conn, job, &labels, &mut seen))
        .collect()
}

fn labelled(
    conn: &mut PgConnection,
    job: &BatchJob,
    labels: &JobLabels,
    seen: &mut queue::Seen,
) -> QueryResult<WireJob> {
    let named = |names: &std::collections::HashMap<i64, String>, id: i64| {
        names
            .get(&id)
            .cloned()
            .ok_or(diesel::result::Error::NotFound)
    };
    let instance = named(&labels.instances, job.instance_id)?;
    let username = named(&labels.users, job.user_id)?;
    let course = match job.course_id {
        Some(c) => Some(named(&labels.courses, c)?),
        None => None,
    };
    let node = job.node_id.and_then(|n| labels.nodes.get(&n).cloned());
    let lease = job.lease_id.and_then(|l| labels.leases.get(&l));
    let gpu = lease
        .and_then(|l| l.gpu_id)
        .and_then(|g| labels.gpus.get(&g).cloned());
    let (place, why) = match job.state {
        JobState::Queued => {
            let (place, why) = queue::place_of(conn, job, lease, seen)?;
            (place, Some(why))
        }
        _ => (None, None),
    };
    Ok(WireJob {
        id: job.id,
        instance,
        username,
        course,
        command: job.command.clone(),
        workdir: job.workdir.clone(),
        gpus: job.gpus.max(0) as u32,
        hours: GpuHours(job.hours),
        priority: job.priority,
        state: job.state,
        submitted_at: job.submitted_at,
        started_at: job.started_at,
        ends_at: job.ends_at,
        ended_at: job.ended_at,
        exit_code: job.exit_code,
        reason: job.reason.clone(),
        node,
        gpu,
        gpu_seconds: job.gpu_seconds,
        place,
        why,
        log_path: log_path(job.id),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workdir_is_the_home_or_under_it() {
        assert_eq!(check_workdir("runs/a", "ann").unwrap(), "runs/a");
        assert_eq!(check_workdir("/home/ann", "ann").unwrap(), "");
        assert_eq!(check_workdir("/home/ann/x/", "ann").unwrap(), "x");
        for bad in [
            "/etc",
            "/home/annie/x",
            "../bob",
            "a/../../b",
            "/home/ann/../bob",
        ] {
            let err = check_workdir(bad, "ann").unwrap_err();
            assert!(
                matches!(&err, ActionError::Invalid { field, .. } if field == "workdir"),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn environment_names_are_shell_names() {
        let env = |k: &str| [(k.to_string(), "v".to_string())].into_iter().collect();
        assert!(check_environment(&env("CUDA_VISIBLE_DEVICES")).is_ok());
        for bad in ["", "1A", "A-B", "-x", "A=B"] {
            assert!(check_environment(&env(bad)).is_err(), "{bad}");
        }
    }
}
