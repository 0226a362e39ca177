//! `cohort delete`: remove instances or snapshots (lxc's `delete`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Delete {
    /// [<remote>:]<instance>[/<snapshot>]...
    #[arg(required = true)]
    pub instances: Vec<String>,
    /// Force the removal of running instances
    #[arg(short, long)]
    pub force: bool,
    /// Require user confirmation
    #[arg(short, long)]
    pub interactive: bool,
}
