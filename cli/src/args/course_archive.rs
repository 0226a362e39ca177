//! `cohort course archive CODE [--days N] [--list] [--download DIR [--user NAME]]`: the
//! students' homes exported at a term's end, listed, or downloaded.

use clap::Args;

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct CourseArchiveArgs {
    /// [<remote>:]<code>
    pub code: String,
    /// Days the archives are kept (default: the course's --archive-days)
    #[arg(long, conflicts_with_all = ["list", "download"])]
    pub days: Option<u32>,
    /// List the course's archives instead of archiving
    #[arg(long, conflicts_with = "download")]
    pub list: bool,
    /// Download the archives into DIR as <user>.tar.gz, each checked against its SHA-256,
    /// instead of archiving
    #[arg(long, value_name = "DIR")]
    pub download: Option<std::path::PathBuf>,
    /// With --download: only this student's archive (a student's own)
    #[arg(long, requires = "download")]
    pub user: Option<String>,
    /// With --list: the table's format
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: TableFormat,
    #[command(flatten)]
    pub wait: WaitFlags,
}
