//! `cohort-bench`: the controller's benchmarks (issue: Benchmarks). Each prints one Markdown row
//! with its raw figures and its ratio to the baseline measured in the same run.
//!
//!   cohort-bench placement [--nodes 1000] [--placements 100000] [--processes 2] [--threads 8]
//!                          [--batch 1]
//!   cohort-bench api [--instances 10000] [--connections 64] [--seconds 20] [--page 100]
//!   cohort-bench gpu-sample [--gpus 8] [--containers 200] [--samples 200]
//!   cohort-bench fleet [--agents 1000] [--containers 10] [--seconds 60] [--gpu-containers 0]
//!   cohort-bench jobs [--jobs 500] [--gpus 8] [--handoffs 20] [--passes 20]
//!   cohort-bench memory [--minutes 60] [--nodes 1] [--students 3] [--sign-ins 20] [--round-s 0]

mod api;
mod fleet;
mod gpu_sample;
mod jobs;
mod memory;
mod placement;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cohort-bench", about = "Cohort's controller benchmarks")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Placement throughput on simulated nodes, two processes at once, against pgbench.
    Placement {
        #[arg(long, default_value_t = 1000)]
        nodes: u32,
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u32,
        #[arg(long, default_value_t = 16)]
        share_limit: u32,
        #[arg(long, default_value_t = 100_000)]
        placements: u32,
        #[arg(long, default_value_t = 2)]
        processes: u32,
        /// Connections per process.
        #[arg(long, default_value_t = 8)]
        threads: u32,
        /// Placements per transaction (1: one `POST /instances`; 30: a course's provision).
        #[arg(long, default_value_t = 1)]
        batch: u32,
    },
    /// One worker process of the placement benchmark (run by `placement`).
    #[command(hide = true)]
    PlacementWorker {
        #[arg(long)]
        url: String,
        #[arg(long)]
        worker: u32,
        #[arg(long)]
        count: u32,
        #[arg(long)]
        threads: u32,
        #[arg(long)]
        batch: u32,
    },
    /// `GET /api/v1/instances` latency with a large inventory under concurrent connections.
    Api {
        #[arg(long, default_value_t = 10_000)]
        instances: u32,
        #[arg(long, default_value_t = 64)]
        connections: u32,
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// Instances per page (`?limit=`); 0 asks for the whole list.
        #[arg(long, default_value_t = 100)]
        page: u32,
        /// Inventory writes a second during the load (node heartbeats, as a fleet's polls make:
        /// 100 nodes polled every 10 s is 10); each changes what a page shows.
        #[arg(long, default_value_t = 10)]
        writes_per_second: u32,
    },
    /// The agent's GPU sample (NVML, attribution, per-container use) at a full GPU server.
    GpuSample {
        #[arg(long, default_value_t = 8)]
        gpus: u32,
        /// Containers, each a cgroup with a process on a GPU.
        #[arg(long, default_value_t = 200)]
        containers: u32,
        #[arg(long, default_value_t = 200)]
        samples: u32,
    },
    /// The controller polling simulated agents over mutual TLS at its default interval.
    Fleet {
        #[arg(long, default_value_t = 1000)]
        agents: u32,
        /// Running containers each agent reports.
        #[arg(long, default_value_t = 10)]
        containers: u32,
        /// How long the controller is measured once every agent was polled.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// Of each agent's containers, how many hold a GPU and run on it (issue 43's GPU-time
        /// accounting: each poll adds their allocated and busy GPU-seconds); 0 for none.
        #[arg(long, default_value_t = 0)]
        gpu_containers: u32,
    },
    /// Batch jobs waiting for a node's GPUs: decisions a second and the GPU handoff (issue 44).
    Jobs {
        #[arg(long, default_value_t = 500)]
        jobs: u32,
        #[arg(long, default_value_t = 8)]
        gpus: u32,
        #[arg(long, default_value_t = 20)]
        handoffs: usize,
        /// Decision passes timed.
        #[arg(long, default_value_t = 20)]
        passes: u32,
    },
    /// The controller's memory over a long mixed load (issue 49's soak).
    Memory {
        #[arg(long, default_value_t = 60.0)]
        minutes: f64,
        /// Real nodes (the test daemon): with one, each round provisions a course and tears it
        /// down; with none, sign-ins and pages only.
        #[arg(long, default_value_t = 1)]
        nodes: usize,
        #[arg(long, default_value_t = 3)]
        students: u32,
        /// Portal sign-ins at once, each round.
        #[arg(long, default_value_t = 20)]
        sign_ins: u32,
        /// Seconds a round takes at least (0: the next starts at once).
        #[arg(long, default_value_t = 0.0)]
        round_s: f64,
    },
}

fn main() -> Result<()> {
    cohort_e2e::process::no_test_limit();
    match Cli::parse().bench {
        Bench::Placement {
            nodes,
            gpus_per_node,
            share_limit,
            placements,
            processes,
            threads,
            batch,
        } => {
            let shape = placement::Shape {
                nodes,
                gpus_per_node,
                share_limit,
                placements,
                processes,
                threads,
                batch,
            };
            let out = placement::run(&shape)?;
            println!(
                "| placement | {} nodes, {} placements, {} per transaction, {} processes x {} connections | {:.1} s | {:.0}/s | pgbench simple-update {:.0} tps | {:.2} |",
                nodes,
                out.placed,
                batch,
                processes,
                threads,
                out.seconds,
                out.per_second(),
                out.pgbench_tps,
                out.per_second() / out.pgbench_tps,
            );
        }
        Bench::PlacementWorker {
            url,
            worker,
            count,
            threads,
            batch,
        } => placement::worker(&url, worker, count, threads, batch)?,
        Bench::Api {
            instances,
            connections,
            seconds,
            page,
            writes_per_second,
        } => {
            let out = api::run(instances, connections, seconds, page, writes_per_second)?;
            println!(
                "| api latency | GET /api/v1/instances?limit={}, {} instances, {} connections, {} s, {} inventory writes | {} requests, {} errors; pages served again {}, read {} | p50 {:.1} ms | p99 {:.1} ms | healthz p99 {:.1} ms | CPU a request: controller {:.2} ms, PostgreSQL {:.2} ms, load generator {:.2} ms |",
                page,
                instances,
                connections,
                seconds,
                out.writes,
                out.requests,
                out.errors,
                out.pages_hit,
                out.pages_read,
                out.p50_ms,
                out.p99_ms,
                out.baseline_p99_ms,
                out.controller_cpu_ms,
                out.postgres_cpu_ms,
                out.client_cpu_ms,
            );
        }
        Bench::GpuSample {
            gpus,
            containers,
            samples,
        } => {
            let out = gpu_sample::run(gpus, containers, samples)?;
            let interval_s = cohort_controller::app::config::PollerConfig::default().interval_s;
            println!(
                "| gpu-sample | {gpus} GPUs, {containers} containers each with a process on one ({} attributed), {} samples | {:.2} ms of CPU a sample | {:.3} % of a core at one sample every {interval_s} s |",
                out.attributed,
                out.samples,
                out.cpu_ms_per_sample,
                out.cpu_ms_per_sample / (interval_s as f64 * 1000.0) * 100.0,
            );
        }
        Bench::Fleet {
            agents,
            containers,
            seconds,
            gpu_containers,
        } => {
            let out = fleet::run(agents, containers, seconds, gpu_containers)?;
            println!(
                "| fleet | {agents} agents over mutual TLS, {containers} containers each ({gpu_containers} on a GPU), polled every {} s, {:.0} s | {} polls | controller CPU {:.1} % of a core | controller memory {:.1} MiB | poll lateness p99 {:.2} s, max {:.2} s | load generator CPU {:.1} %, {} other requests | GPU time accounted for {} instances, {:.0} GPU-s |",
                out.interval_s,
                out.seconds,
                out.polls,
                out.controller_cpu_percent,
                out.controller_rss_mib,
                out.lateness_p99_s,
                out.lateness_max_s,
                out.generator_cpu_percent,
                out.other_requests,
                out.accounted_instances,
                out.allocated_gpu_seconds,
            );
        }
        Bench::Jobs {
            jobs: n,
            gpus,
            handoffs,
            passes,
        } => {
            let out = jobs::run(n, gpus, handoffs, passes)?;
            println!(
                "| jobs | {n} GPU jobs queued on {gpus} GPUs, {} handoffs | a pass {:.1} ms: {:.0} decisions/s | a bare locked transaction {:.0}/s: a pass is {:.0} of them | handoff p50 {:.2} s, max {:.2} s (target < 2 s; the 5 s tick without wakes) |",
                out.handoffs,
                out.pass_ms,
                out.decisions_per_second,
                out.baseline_tps,
                out.pass_ms / 1000.0 * out.baseline_tps,
                out.handoff_p50_s,
                out.handoff_max_s,
            );
            println!(
                "| jobs list | every job's view, the waiting ones' places | {:.1} ms through batch::views | {:.1} ms with each view built alone | {:.3} of it |",
                out.list_ms,
                out.list_alone_ms,
                out.list_ms / out.list_alone_ms,
            );
        }
        Bench::Memory {
            minutes,
            nodes,
            students,
            sign_ins,
            round_s,
        } => {
            let shape = memory::Shape {
                minutes,
                nodes,
                students,
                sign_ins,
                round_s,
            };
            let out = memory::run(&shape)?;
            println!(
                "| memory | {minutes} min, {nodes} nodes: {} rounds of {sign_ins} sign-ins at once, portal and API pages, {} provisions of {students} with {} execs and {} files | controller RSS at start {:.1} MiB, warm {:.1} MiB, peak {:.1} MiB, last {:.1} MiB | second half's trend {:+.1} MiB an hour | target < 150 MiB, no growth |",
                out.rounds,
                out.provisions,
                out.execs,
                out.files,
                out.start_mib,
                out.warm_mib,
                out.peak_mib,
                out.last_mib,
                out.slope_mib_per_hour,
            );
        }
    }
    Ok(())
}
