//! `cohort config show|get`: an instance's configuration (lxc's `config`). `set`, `unset` and
//! `device` are absent: the controller's API has no route that changes a live instance's config.

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct Config {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show instance configurations (YAML)
    Show(ConfigShow),
    /// Get values for instance configuration keys
    Get(ConfigGet),
}

#[derive(Debug, Args)]
pub struct ConfigShow {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Show the expanded configuration (the same here: Cohort uses no profiles)
    #[arg(short, long)]
    pub expanded: bool,
}

#[derive(Debug, Args)]
pub struct ConfigGet {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Configuration key
    pub key: String,
    /// Access the expanded configuration (the same here)
    #[arg(short, long)]
    pub expanded: bool,
}
