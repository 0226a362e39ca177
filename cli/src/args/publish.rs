//! `cohort publish`: a stopped instance becomes an image in the controller's catalog (lxc's
//! `publish [<remote>:]<instance> [<remote>:] --alias A [key=value...]`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Publish {
    /// [<remote>:]<instance> [<remote>:] [description=<text>]
    #[arg(required = true, num_args = 1..=3)]
    pub args: Vec<String>,
    /// New alias to define at target (required: every Cohort image has one)
    #[arg(long, required = true)]
    pub alias: String,
}
