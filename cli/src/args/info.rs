//! `cohort info`: one instance, or the controller when no instance is named (lxc's `info`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Info {
    /// [<remote>:][<instance>]
    pub instance: Option<String>,
    /// Show the resources available to the fleet (nodes, GPUs)
    #[arg(long)]
    pub resources: bool,
}
