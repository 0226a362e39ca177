//! The jobs' decisions, in one transaction under the reclaim lock (leases change in both
//! passes; one controller acts at a time). For each open job in queue order (highest priority,
//! then the earliest): a job whose container stopped ends `killed`; a waiting job whose student
//! is under the course's running limit starts (no GPU, or GPUs its container holds), or asks
//! for a GPU lease and starts once the lease is granted and its attach done; a running job past
//! its limit, cancelled, or whose lease ended is to be stopped, and one near its limit is
//! warned. What the nodes must be asked ([`Plan`]) is done afterwards by [`super::runner`].

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use cohort_proto::api::batch_jobs::JobState;
use cohort_proto::api::gpu_leases::LeaseState;
use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;

use crate::db::enums::AuditAction;
use crate::db::models::batch_job::{BatchJob, CourseJobLimits};
use crate::db::models::gpu_lease::{CourseGpuMode, GpuLease};
use crate::db::models::instance::Instance;
use crate::db::models::operation_item::OperationItem;
use crate::db::models::user::User;
use crate::db::queries::{capacity, coordination};
use crate::reclaim::budget::hours;
use crate::reclaim::leases;

/// Who the audit log names for what the jobs' pass does.
pub const ACTOR: &str = "batch-job";

/// One job the nodes must be asked about.
#[derive(Debug, Clone)]
pub struct Task {
    pub job: BatchJob,
    pub instance: String,
    pub node_id: i64,
    pub username: String,
    pub what: Ask,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// Start it; it runs until this time (its lease's end), or for its hours.
    Start(Option<DateTime<Utc>>),
    /// Read back its state.
    Poll,
    /// Stop it (then read back its state).
    Stop,
    /// Tell it (its log) that its limit comes at this time.
    Warn(DateTime<Utc>),
}

/// How long before its limit a job is warned: a tenth of its time, at most ten minutes.
pub fn warn_ahead_s(hours: f64, hour_s: u64) -> f64 {
    (hours * hour_s as f64 / 10.0).min(600.0)
}

/// Ends job `job`: its state, exit code and why; its lease (waiting or held) goes back, the
/// GPU detached from the still running container.
pub fn end(
    conn: &mut PgConnection,
    job: &BatchJob,
    state: JobState,
    exit_code: Option<i32>,
    reason: &str,
) -> QueryResult<()> {
    BatchJob::finish(conn, job.id, state, exit_code, Some(reason))?;
    tracing::info!(job = job.id, %state, ?exit_code, %reason, "batch job ended");
    let Some(lease) = job
        .lease_id
        .map(|l| GpuLease::find(conn, l))
        .transpose()?
        .flatten()
    else {
        return Ok(());
    };
    let why = format!("job {} ended ({state})", job.id);
    match lease.state {
        LeaseState::Queued => {
            GpuLease::close(conn, lease.id, LeaseState::Cancelled, &why)?;
        }
        LeaseState::Active => {
            GpuLease::close(conn, lease.id, LeaseState::Ended, &why)?;
            let instance = Instance::find(conn, job.instance_id)?;
            if instance.desired_state == DesiredState::Running {
                leases::detach(conn, &instance, &why, ACTOR, AuditAction::DetachGpus)?;
            }
        }
        LeaseState::Ended | LeaseState::Cancelled => {}
    }
    Ok(())
}

/// What a pass decided.
#[derive(Debug, Default)]
pub struct Decided {
    /// What the nodes must be asked.
    pub tasks: Vec<Task>,
    /// A job waits for the worker to attach its GPU: the loop looks again shortly (the worker
    /// wakes it when the attach is done, but may do so before the operation is marked finished).
    pub attaching: bool,
}

/// The pass's decisions (nothing when another controller holds the lock).
pub fn pass(conn: &mut PgConnection, hour_s: u64) -> QueryResult<Decided> {
    if !crate::db::queries::reclaim::try_lock(conn)? {
        return Ok(Decided::default());
    }
    let mut attaching = false;
    let now = coordination::clock(conn)?;
    let open = BatchJob::open(conn)?;
    // Jobs holding a run slot, per student and course: started, or holding a lease request.
    let mut slots: HashMap<(i64, Option<i64>), i64> = HashMap::new();
    for job in &open {
        if job.state != JobState::Queued || job.lease_id.is_some() {
            *slots.entry((job.user_id, job.course_id)).or_default() += 1;
        }
    }
    let mut tasks = Vec::new();
    // Read once for the whole pass: its cost must not grow with queries per waiting job.
    let instance_ids: Vec<i64> = open.iter().map(|j| j.instance_id).collect();
    let instances: HashMap<i64, Instance> = Instance::by_ids(conn, &instance_ids)?
        .into_iter()
        .map(|i| (i.id, i))
        .collect();
    let mut usernames: HashMap<i64, String> = HashMap::new();
    let mut courses = Courses::default();
    for job in open {
        let Some(instance) = instances.get(&job.instance_id).cloned() else {
            continue;
        };
        let (Some(node_id), true) = (
            instance.node_id,
            instance.desired_state == DesiredState::Running,
        ) else {
            let reason = format!("its container {} was stopped", instance.name);
            end(conn, &job, JobState::Killed, None, &reason)?;
            continue;
        };
        if job.node_id.is_some_and(|n| n != node_id) {
            let reason = format!("its container {} moved to another node", instance.name);
            end(conn, &job, JobState::Killed, None, &reason)?;
            continue;
        }
        let username = match usernames.get(&job.user_id) {
            Some(u) => u.clone(),
            None => {
                let u = User::find(conn, job.user_id)?.username;
                usernames.insert(job.user_id, u.clone());
                u
            }
        };
        let task = |what| Task {
            job: job.clone(),
            instance: instance.name.clone(),
            node_id,
            username: username.clone(),
            what,
        };
        match job.state {
            JobState::Queued => {
                let key = (job.user_id, job.course_id);
                let limit = courses.of(conn, job.course_id)?.max_running;
                let held = slots.get(&key).copied().unwrap_or(0);
                if job.lease_id.is_none() && held >= i64::from(limit) {
                    continue;
                }
                let on_demand = courses.on_demand(conn, job.course_id)?;
                match ready(conn, &job, &instance, node_id, on_demand)? {
                    Ready::Wait => {}
                    Ready::Attaching => attaching = true,
                    Ready::Asked => *slots.entry(key).or_default() += 1,
                    Ready::Go(until) => {
                        if job.lease_id.is_none() {
                            *slots.entry(key).or_default() += 1;
                        }
                        BatchJob::starting(conn, job.id, node_id)?;
                        tasks.push(task(Ask::Start(until)));
                    }
                    Ready::Lost(reason) => end(conn, &job, JobState::Failed, None, &reason)?,
                }
            }
            JobState::Starting => {
                let until = match job.lease_id {
                    Some(l) => GpuLease::find(conn, l)?.and_then(|l| l.ends_at),
                    None => None,
                };
                tasks.push(task(Ask::Start(until)));
            }
            JobState::Running | JobState::Unknown => {
                if job.stop_reason.is_none() {
                    if let Some(why) = stop_now(conn, &job, now)? {
                        BatchJob::ask_stop(conn, job.id, JobState::Killed, &why)?;
                        tracing::info!(job = job.id, %why, "stopping a batch job");
                        tasks.push(task(Ask::Stop));
                        continue;
                    }
                } else {
                    tasks.push(task(Ask::Stop));
                    continue;
                }
                if let (Some(ends), None) = (job.ends_at, job.warned_at) {
                    let ahead = warn_ahead_s(job.hours, hour_s);
                    if ends - chrono::Duration::milliseconds((ahead * 1000.0) as i64) <= now {
                        BatchJob::warned(conn, job.id)?;
                        tasks.push(task(Ask::Warn(ends)));
                    }
                }
                tasks.push(task(Ask::Poll));
            }
            _ => {}
        }
    }
    // GPUs given back (here or by the worker since) go to whoever waits.
    let mut nodes: Vec<i64> = GpuLease::open(conn, LeaseState::Queued)?
        .iter()
        .filter_map(|l| l.node_id)
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    for node_id in nodes {
        leases::queue::grant_on_node(conn, node_id, hour_s, leases::queue::ACTOR)?;
    }
    Ok(Decided { tasks, attaching })
}

/// What the pass reads of each course once: its job limits and whether it is on demand.
#[derive(Default)]
struct Courses(HashMap<Option<i64>, (CourseJobLimits, bool)>);

impl Courses {
    fn read(
        &mut self,
        conn: &mut PgConnection,
        id: Option<i64>,
    ) -> QueryResult<(CourseJobLimits, bool)> {
        if let Some(known) = self.0.get(&id) {
            return Ok(*known);
        }
        let limits = CourseJobLimits::of(conn, id)?;
        let on_demand = match id {
            Some(c) => CourseGpuMode::on_demand(conn, c)?.is_some(),
            None => false,
        };
        self.0.insert(id, (limits, on_demand));
        Ok((limits, on_demand))
    }

    fn of(&mut self, conn: &mut PgConnection, id: Option<i64>) -> QueryResult<CourseJobLimits> {
        Ok(self.read(conn, id)?.0)
    }

    fn on_demand(&mut self, conn: &mut PgConnection, id: Option<i64>) -> QueryResult<bool> {
        Ok(self.read(conn, id)?.1)
    }
}

enum Ready {
    /// Not yet (its lease waits).
    Wait,
    /// Its lease is granted; the worker attaches the GPU.
    Attaching,
    /// A lease was asked for: it waits for it.
    Asked,
    /// Start it; until its lease's end, if it has one.
    Go(Option<DateTime<Utc>>),
    /// It can no longer start: why.
    Lost(String),
}

/// Whether a waiting job under its running limit can start now.
fn ready(
    conn: &mut PgConnection,
    job: &BatchJob,
    instance: &Instance,
    node_id: i64,
    on_demand: bool,
) -> QueryResult<Ready> {
    if job.gpus == 0 {
        return Ok(Ready::Go(None));
    }
    if !on_demand {
        // Pinned: the container's own GPUs (a reclaim may have taken them: it waits).
        let held = capacity::gpu_slots_held(conn, instance.id)?;
        return Ok(if held >= i64::from(job.gpus) {
            Ready::Go(None)
        } else {
            Ready::Wait
        });
    }
    let Some(lease_id) = job.lease_id else {
        if GpuLease::open_of(conn, instance.id)?.is_some() {
            // The student's own lease (cohort gpu attach) holds the container's place.
            return Ok(Ready::Wait);
        }
        let course_id = job.course_id.unwrap_or_default();
        let lease = GpuLease::queue(
            conn,
            instance.id,
            job.user_id,
            course_id,
            Some(node_id),
            job.hours,
        )?;
        BatchJob::set_lease(conn, job.id, lease.id)?;
        // Granted (or not) with the rest of its node's queue at the end of the pass.
        return Ok(Ready::Asked);
    };
    let Some(lease) = GpuLease::find(conn, lease_id)? else {
        return Ok(Ready::Lost("its GPU lease was deleted".into()));
    };
    Ok(match lease.state {
        LeaseState::Queued => Ready::Wait,
        // The attach is the worker's: the job starts once it is done.
        LeaseState::Active if OperationItem::unfinished_for(conn, instance.id)? => Ready::Attaching,
        LeaseState::Active => Ready::Go(lease.ends_at),
        LeaseState::Ended | LeaseState::Cancelled => Ready::Lost(format!(
            "its GPU lease ended before it started: {}",
            lease.end_reason.unwrap_or_default()
        )),
    })
}

/// Why a running job is to be stopped now, if it is: its limit came, or its lease ended.
fn stop_now(
    conn: &mut PgConnection,
    job: &BatchJob,
    now: DateTime<Utc>,
) -> QueryResult<Option<String>> {
    if let Some(ends) = job.ends_at {
        if ends <= now {
            return Ok(Some(format!(
                "reached its time limit of {} hours at {}",
                hours(job.hours),
                ends.format("%Y-%m-%d %H:%M:%S UTC")
            )));
        }
    }
    if let Some(l) = job.lease_id {
        if let Some(lease) = GpuLease::find(conn, l)? {
            if lease.state != LeaseState::Active {
                return Ok(Some(format!(
                    "its GPU lease ended: {}",
                    lease.end_reason.unwrap_or_default()
                )));
            }
        }
    }
    Ok(None)
}

/// What the views of many jobs share, each read once for the whole list: the open jobs, each
/// node's GPU queue, each course's limits and each student's running jobs. A fresh one for each
/// list (or view), so nothing outlives the transaction it was read in.
#[derive(Default)]
pub struct Seen {
    open: Option<Vec<BatchJob>>,
    queues: HashMap<i64, leases::queue::NodeQueue>,
    limits: HashMap<Option<i64>, CourseJobLimits>,
    running: HashMap<(i64, Option<i64>), i64>,
}

impl Seen {
    fn open(&mut self, conn: &mut PgConnection) -> QueryResult<&[BatchJob]> {
        if self.open.is_none() {
            self.open = Some(BatchJob::open(conn)?);
        }
        Ok(self.open.as_deref().unwrap_or_default())
    }

    fn queue(
        &mut self,
        conn: &mut PgConnection,
        node_id: i64,
    ) -> QueryResult<&leases::queue::NodeQueue> {
        Ok(match self.queues.entry(node_id) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(slot) => slot.insert(leases::queue::NodeQueue::read(conn, node_id)?),
        })
    }

    fn limits(
        &mut self,
        conn: &mut PgConnection,
        course_id: Option<i64>,
    ) -> QueryResult<CourseJobLimits> {
        if let Some(limits) = self.limits.get(&course_id) {
            return Ok(*limits);
        }
        let limits = CourseJobLimits::of(conn, course_id)?;
        self.limits.insert(course_id, limits);
        Ok(limits)
    }

    fn running(
        &mut self,
        conn: &mut PgConnection,
        user_id: i64,
        course_id: Option<i64>,
    ) -> QueryResult<i64> {
        if let Some(n) = self.running.get(&(user_id, course_id)) {
            return Ok(*n);
        }
        let (running, _) = BatchJob::counts(conn, user_id, course_id)?;
        self.running.insert((user_id, course_id), running);
        Ok(running)
    }
}

/// A waiting job's place among its node's waiting jobs (1: next) and why it waits; `seen`
/// holds what the other jobs of the same list already read.
pub fn place_of(
    conn: &mut PgConnection,
    job: &BatchJob,
    lease: Option<&GpuLease>,
    seen: &mut Seen,
) -> QueryResult<(Option<u32>, String)> {
    if let Some(lease) = lease.filter(|l| l.state == LeaseState::Queued) {
        if let Some(node_id) = lease.node_id {
            if let Some(p) = seen.queue(conn, node_id)?.place_of(lease.id) {
                return Ok((Some(p.place), format!("waiting for a GPU: {}", p.why)));
            }
        }
    }
    if lease.is_some_and(|l| l.state == LeaseState::Active) {
        return Ok((Some(1), "its GPU is being attached; it starts next".into()));
    }
    let ahead = seen
        .open(conn)?
        .iter()
        .filter(|j| j.state == JobState::Queued && j.node_id == job.node_id)
        .take_while(|j| j.id != job.id)
        .count();
    let limits = seen.limits(conn, job.course_id)?;
    let running = seen.running(conn, job.user_id, job.course_id)?;
    let why = if running >= i64::from(limits.max_running) {
        format!(
            "waiting for its student's {running} running job(s) to end (the course's max_running \
             is {})",
            limits.max_running
        )
    } else if job.gpus > 0 && job.lease_id.is_none() {
        let instance = Instance::find(conn, job.instance_id)?;
        if GpuLease::open_of(conn, instance.id)?.is_some() {
            format!(
                "container {} holds a GPU lease of its own: the job asks for its GPU once that \
                 lease is given back (cohort gpu detach {})",
                instance.name, instance.name
            )
        } else {
            "asks for its GPU at the next pass".into()
        }
    } else {
        "starts at the next pass".into()
    };
    Ok((Some(ahead as u32 + 1), why))
}
