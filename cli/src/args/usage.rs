//! `cohort usage`: GPU time per student, course, node or day (Cohort's own verb, issue 43).

use clap::Args;

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Usage {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Only this course (its code)
    #[arg(long)]
    pub course: Option<String>,
    /// Only this user's instances
    #[arg(long)]
    pub user: Option<String>,
    /// From this day (YYYY-MM-DD, UTC) or time (RFC 3339)
    #[arg(long)]
    pub since: Option<String>,
    /// Up to the end of this day (YYYY-MM-DD, UTC), or before this time (RFC 3339)
    #[arg(long)]
    pub until: Option<String>,
    /// Group rows by student, course, node or day
    #[arg(long, default_value = "student")]
    pub by: String,
    /// Format (table|csv|json, also yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
