//! `cohort start|stop|restart`: state changes on one or more instances (lxc's `action.go`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Start {
    /// [<remote>:]<instance>...
    #[arg(required_unless_present = "all")]
    pub instances: Vec<String>,
    /// Run against all instances
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct Stop {
    /// [<remote>:]<instance>...
    #[arg(required_unless_present = "all")]
    pub instances: Vec<String>,
    /// Run against all instances
    #[arg(long)]
    pub all: bool,
    /// Force the instance to shutdown
    #[arg(short, long)]
    pub force: bool,
    /// Time to wait for the instance before killing it
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub timeout: i64,
}

#[derive(Debug, Args)]
pub struct Restart {
    #[command(flatten)]
    pub stop: Stop,
}
