//! `cohort completion bash|zsh|fish`: print a completion script for the shell.

use clap::Args;

#[derive(Debug, Args)]
pub struct Completion {
    /// Shell to generate the script for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
