//! `cohort list`: lxc's instance list with column letters and output formats.

use clap::Args;

use super::TableFormat;

/// The column letters, shown in `--help` like lxc's.
const COLUMNS_HELP: &str = "\
The -c option takes a list of shorthand chars that control which instance
attributes to output when displaying in table or csv format. Commas between
consecutive shorthand chars are optional.

Pre-defined column shorthand chars (as in lxc):
  c - Creation date
  F - Base Image (as the instance was created from: alias or fingerprint)
  f - Base Image (first 12 characters)
  l - Last used date (here: when the controller last saw the instance)
  L - Location of the instance (its node)
  n - Name
  s - State (QUEUED, PENDING, RUNNING, STOPPED, UNKNOWN, ERROR)
  t - Type (always CONTAINER)

Cohort's own:
  C - Course code
  g - GPUs (count and model)
  G - GPU use of the instance's processes (per GPU: processes, memory, share)
  H - SSH endpoint (host:port)
  o - Owner (username)

lxc's 4 6 a b d D e m M N p P S u and custom config columns are refused:
the controller's API does not carry that data.

Default column layout: nsLtoCgH
Fast column layout: nsctL

Filters: a name prefix, or key=value on status, location, owner, course or a
config key.";

#[derive(Debug, Args)]
#[command(after_long_help = COLUMNS_HELP)]
pub struct List {
    /// [<remote>:] and filters (see --help)
    pub filters: Vec<String>,
    /// Columns (default "nsLtoCgH")
    #[arg(short, long, default_value = crate::columns::DEFAULT)]
    pub columns: String,
    /// Fast mode (same as --columns=nsctL)
    #[arg(long)]
    pub fast: bool,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
