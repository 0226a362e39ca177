//! `cohort file push|pull`: copy files into and out of instances (lxc's `file`).

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct File {
    #[command(subcommand)]
    pub command: FileCommand,
}

#[derive(Debug, Subcommand)]
pub enum FileCommand {
    /// Push files into instances
    Push(FilePush),
    /// Pull files from instances
    Pull(FilePull),
}

#[derive(Debug, Args)]
pub struct FilePush {
    /// <source path>... [<remote>:]<instance>/<path>
    #[arg(required = true, num_args = 2..)]
    pub paths: Vec<String>,
    /// Set the file's uid on push
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub uid: i64,
    /// Set the file's gid on push
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub gid: i64,
    /// Set the file's perms on push (octal, e.g. 0644)
    #[arg(long)]
    pub mode: Option<String>,
    /// Create any directories necessary
    #[arg(short = 'p', long)]
    pub create_dirs: bool,
}

#[derive(Debug, Args)]
pub struct FilePull {
    /// [<remote>:]<instance>/<path>... <target path>
    #[arg(required = true, num_args = 2..)]
    pub paths: Vec<String>,
    /// Create any directories necessary
    #[arg(short = 'p', long)]
    pub create_dirs: bool,
}
