//! `cohort home`: a course container's home volume (Cohort's own verb, issue 45): the snapshots
//! its daemon keeps of it, and a restore from one.

use clap::{Args, Subcommand};

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct Home {
    #[command(subcommand)]
    pub command: HomeCommand,
}

#[derive(Debug, Subcommand)]
pub enum HomeCommand {
    /// List the snapshots of an instance's home volume, oldest first
    Snapshots(HomeSnapshots),
    /// Restore an instance's home volume from one of its snapshots, whole (a running container
    /// is stopped around it and started again), or with --path one file or directory of it
    /// copied into ~/restored/<snapshot>/ (the container keeps running)
    Restore(HomeRestore),
}

#[derive(Debug, Args)]
pub struct HomeRestore {
    /// [<remote>:]<instance>
    pub instance: String,
    /// The snapshot, as `cohort home snapshots` lists it
    pub snapshot: String,
    /// Restore only this path, relative to the home (notes/week3.md, project), into
    /// ~/restored/<snapshot>/<path>
    #[arg(long)]
    pub path: Option<String>,
    #[command(flatten)]
    pub wait: WaitFlags,
}

#[derive(Debug, Args)]
pub struct HomeSnapshots {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Format (table|csv|json, also yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
