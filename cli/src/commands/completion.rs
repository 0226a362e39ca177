//! `cohort completion SHELL`: clap_complete's script for the whole command tree.

use clap::CommandFactory;

use crate::args::completion::Completion;
use crate::args::Cli;

pub fn run(args: &Completion) {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "cohort", &mut std::io::stdout());
}
