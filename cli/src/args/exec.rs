//! `cohort exec NAME -- CMD`: run a command in an instance (lxc's `exec`, non-interactive).

use clap::Args;

#[derive(Debug, Args)]
pub struct Exec {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Command line to run
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
    /// Directory to run the command in (default /root)
    #[arg(long)]
    pub cwd: Option<String>,
    /// Environment variable to set (e.g. HOME=/home/foo)
    #[arg(long, value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// User ID to run the command as (default 0)
    #[arg(long)]
    pub user: Option<u32>,
    /// Group ID to run the command as (default 0)
    #[arg(long)]
    pub group: Option<u32>,
    /// Disable stdin (always the case: commands run without a terminal)
    #[arg(short = 'n', long)]
    pub disable_stdin: bool,
    /// Disable pseudo-terminal allocation (always the case)
    #[arg(short = 'T', long)]
    pub force_noninteractive: bool,
}
