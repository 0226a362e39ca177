//! `cohort cluster list|show|evacuate|restore`: Cohort's nodes through lxc's cluster verbs.

use clap::{Args, Subcommand};

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct Cluster {
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// List all the cluster members (nodes)
    #[command(visible_alias = "ls")]
    List(ClusterList),
    /// Show details of a cluster member (YAML)
    Show(Member),
    /// Evacuate a cluster member: stop placing there and move its instances away
    #[command(visible_alias = "evac")]
    Evacuate(MemberAction),
    /// Restore an evacuated cluster member
    Restore(MemberAction),
}

#[derive(Debug, Args)]
pub struct ClusterList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct Member {
    /// [<remote>:]<member>
    pub member: String,
}

#[derive(Debug, Args)]
pub struct MemberAction {
    /// [<remote>:]<member>
    pub member: String,
    /// Force evacuation without user confirmation
    #[arg(long)]
    pub force: bool,
    /// Force a particular evacuation action: stop (the default) or migrate (move each
    /// instance, root disk and home, to another member; restore brings them back)
    #[arg(long, value_enum)]
    pub action: Option<EvacuateAction>,
    #[command(flatten)]
    pub wait: WaitFlags,
}

/// lxc's `cluster evacuate --action` values Cohort has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EvacuateAction {
    /// Stop the instances where they are
    Stop,
    /// Move them with their data to other members
    Migrate,
}
