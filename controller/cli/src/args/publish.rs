//! `cohort publish`: make an image from an instance (lxc's `publish`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Publish {
    /// [<remote>:]<instance>
    pub instance: String,
    /// New alias to define at target
    #[arg(long, required = true)]
    pub alias: String,
    /// Stop the instance if currently running
    #[arg(short, long)]
    pub force: bool,
    #[command(flatten)]
    pub wait: super::WaitFlags,
}
