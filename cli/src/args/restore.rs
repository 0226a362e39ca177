//! `cohort restore`: restore an instance from one of its snapshots (lxc's `restore`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Restore {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Snapshot name
    pub snapshot: String,
}
