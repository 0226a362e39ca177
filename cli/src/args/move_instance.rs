//! `cohort move`: move an instance to another cluster member (lxc's `move NAME --target
//! MEMBER`). Renaming and moving between remotes, which lxc's `move` also does, are not Cohort's.

use clap::Args;

use super::WaitFlags;

#[derive(Debug, Args)]
pub struct Move {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Cluster member (node) to move the instance to, with its root disk and home
    #[arg(long)]
    pub target: String,
    #[command(flatten)]
    pub wait: WaitFlags,
}
