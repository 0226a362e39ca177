//! `cohort snapshot`: create an instance snapshot (lxc's `snapshot`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Snapshot {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Snapshot name (default snapN, as lxc)
    pub snapshot: Option<String>,
    /// If the snapshot name already exists, delete and create a new one
    #[arg(long)]
    pub reuse: bool,
}
