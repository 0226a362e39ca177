//! The command line as clap structs, one file per `lxc` verb; nothing here talks to a controller.
//! Flags copy `lxc` 5.0's where a verb exists there; Cohort's own verbs follow DESIGN.md.

pub mod action;
pub mod audit;
pub mod cluster;
pub mod completion;
pub mod config;
pub mod course;
pub mod course_archive;
pub mod course_data;
pub mod delete;
pub mod exec;
pub mod file;
pub mod gpu;
pub mod home;
pub mod image;
pub mod info;
pub mod init;
pub mod job;
pub mod launch;
pub mod list;
pub mod move_instance;
pub mod node;
pub mod operation;
pub mod publish;
pub mod remote;
pub mod restore;
pub mod snapshot;
pub mod usage;
pub mod user;

use clap::{Parser, Subcommand};

/// The whole command line: global flags and one verb.
#[derive(Debug, Parser)]
#[command(
    name = "cohort",
    version,
    about = "Command line client for a Cohort GPU lab (lxc-compatible)",
    long_about = "Command line client for a Cohort GPU lab.\n\n\
        Verbs, flags and output formats follow lxc's. Instances are named [<remote>:]<name>; \
        remotes are kept in ~/.config/cohort/config.yml (COHORT_CONF moves it)."
)]
pub struct Cli {
    /// Don't show progress information
    #[arg(short, long, global = true)]
    pub quiet: bool,

    #[command(subcommand)]
    pub verb: Verb,
}

#[derive(Debug, Subcommand)]
pub enum Verb {
    /// Manage the list of remote controllers
    Remote(remote::Remote),
    /// List instances
    #[command(visible_alias = "ls")]
    List(list::List),
    /// Create and start instances from images
    Launch(launch::Launch),
    /// Create instances from images
    #[command(visible_alias = "create")]
    Init(init::Init),
    /// Start instances
    Start(action::Start),
    /// Stop instances
    Stop(action::Stop),
    /// Restart instances
    Restart(action::Restart),
    /// Move instances to another cluster member, with their data
    #[command(visible_alias = "mv")]
    Move(move_instance::Move),
    /// Delete instances and snapshots
    #[command(visible_alias = "rm")]
    Delete(delete::Delete),
    /// Show instance or server information
    Info(info::Info),
    /// Execute commands in instances
    Exec(exec::Exec),
    /// Manage instance configuration options
    Config(config::Config),
    /// Create instance snapshots
    Snapshot(snapshot::Snapshot),
    /// Restore instances from snapshots
    Restore(restore::Restore),
    /// Manage files in instances
    File(file::File),
    /// Manage images
    Image(image::Image),
    /// Publish instances as images
    Publish(publish::Publish),
    /// Manage cluster members (Cohort's nodes)
    Cluster(cluster::Cluster),
    /// List, show and wait for background operations
    Operation(operation::Operation),
    /// Enroll, remove and list GPU nodes (Cohort)
    Node(node::Node),
    /// Manage courses: rosters, provisioning, SSH endpoints (Cohort)
    Course(course::Course),
    /// Manage users and API tokens (Cohort)
    User(user::User),
    /// Read the audit log: who did what, when, and why (Cohort)
    Audit(audit::Audit),
    /// GPU time (allocated and busy GPU-hours) by student, course, node or day (Cohort)
    Usage(usage::Usage),
    /// GPUs on demand: attach a GPU for a lease, give it back, see the queue (Cohort)
    Gpu(gpu::Gpu),
    /// Batch jobs: run a script to completion in your container, with a GPU when it is your
    /// turn; follow its log, cancel it (Cohort)
    Job(job::Job),
    /// The snapshots of a course container's home volume (Cohort)
    Home(home::Home),
    /// Print a shell completion script
    Completion(completion::Completion),
}

/// `--format` for verbs whose output is a table (lxc's `-f, --format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableFormat {
    Table,
    Csv,
    Json,
    Yaml,
    Compact,
}

/// `--wait`/`--no-wait`: both flags exist so a script can say either; the last one wins.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitFlags {
    /// Wait for the operation to finish (with a progress bar unless --quiet)
    #[arg(long, overrides_with = "no_wait")]
    pub wait: bool,
    /// Return as soon as the operation is queued and print its id
    #[arg(long, overrides_with = "wait")]
    pub no_wait: bool,
}

impl WaitFlags {
    /// Whether to wait, given the verb's own default.
    pub fn resolve(&self, default: bool) -> bool {
        if self.wait {
            true
        } else if self.no_wait {
            false
        } else {
            default
        }
    }
}
