//! `cohort operation list|show|wait`: the controller's durable operations (lxc's `operation`).

use clap::{Args, Subcommand};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Operation {
    #[command(subcommand)]
    pub command: OperationCommand,
}

#[derive(Debug, Subcommand)]
pub enum OperationCommand {
    /// List background operations
    #[command(visible_alias = "ls")]
    List(OperationList),
    /// Show details on a background operation (YAML)
    Show(OperationId),
    /// Wait for an operation to finish, with a progress bar unless --quiet (Cohort)
    Wait(OperationId),
}

#[derive(Debug, Args)]
pub struct OperationList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct OperationId {
    /// [<remote>:]<operation>
    pub operation: String,
}
