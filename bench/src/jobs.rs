//! Issue 44's benchmark: batch jobs queued for a node's GPUs. `jobs` GPU jobs (one per student,
//! each in their own running container) wait for a node with `gpus` GPUs, through the
//! controller's own jobs pass, lease queue and worker on a real PostgreSQL; the node is faked at
//! its trait seam (`GpuNode`: no GPU here), answering each job's execs at once as a container
//! whose job runs until the benchmark ends it. Measured:
//! - decisions a second: one jobs pass's decision transaction (`batch::queue::pass`: every open
//!   job looked at, the lease queue granted), with `gpus` jobs running and the rest waiting;
//!   the baseline is a transaction that only takes the same advisory lock, on the same database;
//! - the handoff: from a job's end recorded to the next job running on the GPU it gave back (the
//!   worker's detach and attach, the jobs' loop woken by each), `handoffs` times; the target is
//!   under 2 s, and the loop's tick (`COHORT_JOB_INTERVAL_S`, 5 s) is what it would take without
//!   those wakes;
//! - the list (`GET /jobs` as an admin sees it): every job's view, with each waiting one's place
//!   in its node's GPU queue, built through `batch::views` against the baseline of each view
//!   built alone (one read of the queue a job), both in the same run; the two must be equal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Result};
use cohort_controller::batch;
use cohort_controller::jobs::worker;
use cohort_e2e::controller::TestController;
use cohort_e2e::gpu_node::GpuNode;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

pub struct Outcome {
    pub decisions_per_second: f64,
    pub pass_ms: f64,
    pub baseline_tps: f64,
    pub handoff_p50_s: f64,
    pub handoff_max_s: f64,
    pub handoffs: usize,
    /// Every job's view built alone (as `GET /jobs` did), milliseconds for the whole list.
    pub list_alone_ms: f64,
    /// The same list through `batch::views`, what they share read once.
    pub list_ms: f64,
}

#[derive(QueryableByName)]
struct Id {
    #[diesel(sql_type = BigInt)]
    id: i64,
}

#[derive(QueryableByName)]
struct State {
    #[diesel(sql_type = Text)]
    state: String,
}

fn seed(t: &TestController, jobs: u32, gpus: u32) -> Result<()> {
    let node = t.node("bench-node", (20000, 29999), 512, 4096, true);
    for g in 0..gpus {
        t.gpu(&node, &format!("GPU-bench-{g}"), g as i32, "NVIDIA H100", 1);
    }
    t.image("base");
    let (prof, _) = t.user("prof", "instructor");
    t.conn()
        .batch_execute(&format!(
            "INSERT INTO courses (code, title, instructor_id, image_id, cpu, memory_mib, disk_gib,
                                  gpus, gpu_share, state)
               SELECT 'bj', 'Bench jobs', {prof}, id, 1, 256, 2, 1, 'exclusive', 'active'
               FROM images LIMIT 1;
             INSERT INTO course_gpu_modes (course_id, gpu_mode, gpu_lease_max_hours)
               SELECT id, 'on-demand', 168 FROM courses;
             INSERT INTO users (username, role)
               SELECT 's' || n, 'student' FROM generate_series(1, {jobs}) AS n;
             INSERT INTO instances (name, owner_id, course_id, image_id, node_id, ssh_port,
                                    desired_state, observed_state, cpu, memory_mib, disk_gib,
                                    gpu_count, gpu_share, strategy, priority, config, home_gib)
               SELECT 'bj-' || u.username, u.id, c.id, c.image_id, {node}, 20000 + u.id::int, 'running',
                      'running', 1, 256, 2, 0, 'exclusive', 'spread', 0, '{{}}', 0
               FROM users u, courses c WHERE u.role = 'student';
             INSERT INTO batch_jobs (instance_id, user_id, course_id, command, gpus, hours, state,
                                     node_id, submitted_at)
               SELECT i.id, i.owner_id, i.course_id, ARRAY['python', 'train.py'], 1, 100,
                      'queued', {node}, now() + i.id * interval '1 millisecond'
               FROM instances i;
             ANALYZE;",
            prof = prof.user.id,
            node = node.id,
        ))
        .map_err(|e| anyhow::anyhow!("seed the jobs: {e}"))
}

/// The jobs running now, oldest first.
fn running_jobs(t: &TestController) -> Result<Vec<i64>> {
    Ok(
        diesel::sql_query("SELECT id FROM batch_jobs WHERE state = 'running' ORDER BY id")
            .load::<Id>(&mut t.conn())?
            .into_iter()
            .map(|r| r.id)
            .collect(),
    )
}

pub fn run(jobs: u32, gpus: u32, handoffs: usize, passes: u32) -> Result<Outcome> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let dir = tempfile::tempdir()?;
        let lib = cohort_e2e::observe::build_fake_nvml(dir.path());
        let node = GpuNode::new(&lib, false);
        let t = TestController::with_agents(Arc::new(node.clone()));
        seed(&t, jobs, gpus)?;
        let ctl = t.ctl.clone();
        tokio::spawn(worker::run(ctl.clone()));
        // Every GPU taken by a running job, by passes run here (the loop not yet started, so
        // the decisions below each take the lock).
        let deadline = Instant::now() + Duration::from_secs(300);
        while running_jobs(&t)?.len() < gpus as usize {
            ensure!(Instant::now() < deadline, "the first {gpus} jobs never ran");
            batch::runner::pass(&ctl).await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        // The decisions, timed in the steady state, against a transaction doing nothing else.
        let hour_s = ctl.config.reclaim.lease_hour_s;
        let url = ctl.config.database.url.clone();
        let (pass_ms, baseline_tps, list_alone_ms, list_ms) =
            tokio::task::spawn_blocking(move || -> Result<(f64, f64, f64, f64)> {
                let mut conn = PgConnection::establish(&url)?;
                let started = Instant::now();
                for _ in 0..passes {
                    let tasks = conn.transaction(|c| batch::queue::pass(c, hour_s))?.tasks;
                    ensure!(
                        tasks.len() >= gpus as usize,
                        "a pass that decided nothing ({} tasks): the lock was not taken",
                        tasks.len()
                    );
                }
                let pass_ms = started.elapsed().as_secs_f64() * 1000.0 / f64::from(passes);
                let started = Instant::now();
                let n = 2000;
                for _ in 0..n {
                    conn.transaction(|c| {
                        cohort_controller::db::queries::reclaim::try_lock(c).map(drop)
                    })?;
                }
                let baseline_tps = f64::from(n) / started.elapsed().as_secs_f64();
                let jobs =
                    cohort_controller::db::models::batch_job::BatchJob::recent(&mut conn, 1000)?;
                let started = Instant::now();
                let alone = jobs
                    .iter()
                    .map(|j| batch::view(&mut conn, j))
                    .collect::<Result<Vec<_>, _>>()?;
                let list_alone_ms = started.elapsed().as_secs_f64() * 1000.0;
                let started = Instant::now();
                let shared = batch::views(&mut conn, &jobs)?;
                let list_ms = started.elapsed().as_secs_f64() * 1000.0;
                ensure!(
                    alone == shared,
                    "the list's views differ from each built alone"
                );
                ensure!(
                    shared.iter().filter(|j| j.place.is_some()).count() + gpus as usize
                        >= jobs.len(),
                    "the waiting jobs have no place"
                );
                Ok((pass_ms, baseline_tps, list_alone_ms, list_ms))
            })
            .await??;

        tokio::spawn(batch::run(ctl.clone()));
        // The handoffs: one running job ends at a time; from its end recorded to the next start.
        let mut times = Vec::new();
        for _ in 0..handoffs {
            let before = running_jobs(&t)?;
            let ending = before[0];
            node.calls().jobs.insert(ending.to_string(), Some(0));
            let deadline = Instant::now() + Duration::from_secs(60);
            let ended_at = loop {
                let s = diesel::sql_query("SELECT state FROM batch_jobs WHERE id = $1")
                    .bind::<BigInt, _>(ending)
                    .get_result::<State>(&mut t.conn())?;
                if s.state == "succeeded" {
                    break Instant::now();
                }
                ensure!(Instant::now() < deadline, "job {ending} never ended");
                tokio::time::sleep(Duration::from_millis(10)).await;
            };
            loop {
                let now = running_jobs(&t)?;
                if now.len() == before.len() && !now.contains(&ending) {
                    times.push(ended_at.elapsed().as_secs_f64());
                    break;
                }
                ensure!(
                    Instant::now() < deadline,
                    "no job started after {ending}'s end"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        times.sort_by(f64::total_cmp);
        let decisions = f64::from(jobs) / (pass_ms / 1000.0);
        Ok(Outcome {
            decisions_per_second: decisions,
            pass_ms,
            baseline_tps,
            handoff_p50_s: times[times.len() / 2],
            handoff_max_s: *times.last().unwrap_or(&0.0),
            handoffs: times.len(),
            list_alone_ms,
            list_ms,
        })
    })
}
