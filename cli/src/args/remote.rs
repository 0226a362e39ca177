//! `cohort remote`: lxc's `remote add|list|switch|remove|get-default`, for Cohort controllers.

use clap::{Args, Subcommand};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Remote {
    #[command(subcommand)]
    pub command: RemoteCommand,
}

#[derive(Debug, Subcommand)]
pub enum RemoteCommand {
    /// Add a controller: fetch its certificate, show the fingerprint and pin it
    Add(RemoteAdd),
    /// List the configured remotes
    #[command(visible_alias = "ls")]
    List(RemoteList),
    /// Set the default remote
    #[command(visible_alias = "set-default")]
    Switch(RemoteName),
    /// Remove a remote
    #[command(visible_alias = "rm")]
    Remove(RemoteName),
    /// Show the default remote
    GetDefault,
}

#[derive(Debug, Args)]
pub struct RemoteAdd {
    /// Name of the remote
    pub name: String,
    /// Controller URL, e.g. https://lab.example.edu:8443
    pub url: String,
    /// API token (`cohort user token` prints one)
    #[arg(long, env = "COHORT_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Accept certificate
    #[arg(long)]
    pub accept_certificate: bool,
}

#[derive(Debug, Args)]
pub struct RemoteList {
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct RemoteName {
    /// Name of the remote
    pub name: String,
}
