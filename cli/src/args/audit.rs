//! `cohort audit list`: the controller's audit log (Cohort's own verb).

use clap::{Args, Subcommand};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Audit {
    #[command(subcommand)]
    pub command: AuditCommand,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// List audit log entries, newest first (admins: all; instructors: their courses)
    #[command(visible_alias = "ls")]
    List(AuditList),
}

#[derive(Debug, Args)]
pub struct AuditList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Only entries by this actor (a username, or `reclaim` for the reclaimer)
    #[arg(long)]
    pub actor: Option<String>,
    /// Only this action (create, stop, detach, ...)
    #[arg(long)]
    pub action: Option<String>,
    /// Only objects of this kind (instance, course, node, ...)
    #[arg(long)]
    pub object_kind: Option<String>,
    /// Only this object (an instance name, course code, ...)
    #[arg(long)]
    pub object: Option<String>,
    /// Only entries at or after this time (RFC 3339, e.g. 2026-11-22T08:00:00Z)
    #[arg(long)]
    pub since: Option<String>,
    /// How many entries at most (pages of up to 1000 are fetched as needed)
    #[arg(long, default_value_t = 100)]
    pub limit: u32,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
