//! `cohort course data push|list|rm|quota`: a course's datasets.

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct CourseData {
    #[command(subcommand)]
    pub command: DataCommand,
}

#[derive(Debug, Subcommand)]
pub enum DataCommand {
    /// Push a directory (sent as a tar, streamed) or a tarball as a dataset; a new version
    /// replaces the old in every container of the course
    Push(DataPush),
    /// List the course's datasets and its quota
    #[command(visible_alias = "ls")]
    List(DataList),
    /// Remove a dataset from the course and its containers
    #[command(visible_alias = "remove")]
    Rm(DataRm),
    /// Set the course's data quota in MiB, or `default` (admin)
    Quota(DataQuotaArgs),
}

#[derive(Debug, Args)]
pub struct DataPush {
    /// Course code, optionally `remote:CODE`
    pub code: String,
    /// A directory or a .tar file
    pub path: String,
    /// Mounted at /data/NAME (default: the directory's or tarball's name)
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Debug, Args)]
pub struct DataList {
    pub code: String,
}

#[derive(Debug, Args)]
pub struct DataRm {
    pub code: String,
    pub name: String,
}

#[derive(Debug, Args)]
pub struct DataQuotaArgs {
    pub code: String,
    /// MiB, or `default`
    pub mib: String,
}
