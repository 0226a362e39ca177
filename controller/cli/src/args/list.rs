//! `cohort list`: lxc's instance list with column letters and output formats.

use clap::Args;

use super::TableFormat;

/// The column letters, shown in `--help` like lxc's.
const COLUMNS_HELP: &str = "\
The -c option takes a list of shorthand chars that control which instance
attributes to output when displaying in table or csv format. Commas between
consecutive shorthand chars are optional.

Pre-defined column shorthand chars (as in lxc):
  4 - IPv4 address
  6 - IPv6 address
  a - Architecture
  c - Creation date
  d - Description
  D - disk usage
  l - Last used date
  m - Memory usage
  n - Name
  N - Number of Processes
  s - State
  S - Number of snapshots
  t - Type (persistent or ephemeral)
  u - CPU usage (in seconds)
  L - Location of the instance (its node)
  f - Base Image Fingerprint (short)
  F - Base Image Fingerprint (long)

Cohort's own:
  o - Owner (username)
  C - Course code
  g - GPUs (count and model)
  H - SSH endpoint (host:port)

Default column layout: ns46tSL
Fast column layout: nsacPt is lxc's; here --fast gives nsacLt";

#[derive(Debug, Args)]
#[command(after_long_help = COLUMNS_HELP)]
pub struct List {
    /// [<remote>:] and filters: a name prefix, or key=value on
    /// status, location, owner, course
    pub filters: Vec<String>,
    /// Columns (default "ns46tSL")
    #[arg(short, long, default_value = "ns46tSL")]
    pub columns: String,
    /// Fast mode (same as --columns=nsacLt)
    #[arg(long, conflicts_with = "columns")]
    pub fast: bool,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
    /// Display instances of every owner (admins and instructors see more than their own)
    #[arg(long)]
    pub all_projects: bool,
}
