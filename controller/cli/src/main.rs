//! The `cohort` binary: parse the command line, run it, print errors as lxc does.

use clap::Parser;

fn main() {
    let _cli = cohort_cli::args::Cli::parse();
}
