//! `cohort gpu attach|detach|queue`: GPUs on demand in a course whose `gpu_mode` is
//! `on-demand` (Cohort's own verb, issue 43).

use clap::{Args, Subcommand};

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct Gpu {
    #[command(subcommand)]
    pub command: GpuCommand,
}

#[derive(Debug, Subcommand)]
pub enum GpuCommand {
    /// Ask for a GPU for a container for a lease of some hours; queues when none is free
    Attach(GpuAttach),
    /// Give the container's GPU back early, or leave the queue
    Detach(GpuTarget),
    /// The open GPU leases and the queue, with each request's place and why
    Queue(GpuQueue),
    /// Your GPU budgets this period: each course's hours, granted, used
    Budget(GpuBudget),
    /// Attach again the GPUs the reclaimer took from a running container (pinned courses);
    /// waits for a free one
    Reattach(GpuReattach),
}

#[derive(Debug, Args)]
pub struct GpuReattach {
    /// [<remote>:]<instance>
    pub name: String,
    #[command(flatten)]
    pub wait: WaitFlags,
}

#[derive(Debug, Args)]
pub struct GpuBudget {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (table|csv|json, also yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct GpuAttach {
    /// [<remote>:]<instance>
    pub name: String,
    /// How long, in hours (default 2, at most the course's gpu_lease_max_hours), e.g. 1 or 0.5
    #[arg(long, allow_hyphen_values = true)]
    pub hours: Option<String>,
}

#[derive(Debug, Args)]
pub struct GpuTarget {
    /// [<remote>:]<instance>
    pub name: String,
}

#[derive(Debug, Args)]
pub struct GpuQueue {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (table|csv|json, also yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

/// `--gpu-mode` and `--gpu-lease-max-hours` of `cohort course set`.
#[derive(Debug, Default, Args)]
pub struct GpuModeFlags {
    /// How the course's containers get GPUs: pinned (from creation) or on-demand (leased with
    /// `cohort gpu attach`)
    #[arg(long, value_name = "pinned|on-demand")]
    pub gpu_mode: Option<String>,
    /// On demand: the longest lease a student may ask for, in hours (default 2)
    #[arg(long, value_name = "HOURS", allow_hyphen_values = true)]
    pub gpu_lease_max_hours: Option<String>,
}
