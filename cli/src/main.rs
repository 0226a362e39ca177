//! The `cohort` binary: parse the command line, run it, print errors as lxc does
//! (`Error: ...` on stderr, exit code 1).

use clap::Parser;

fn main() {
    let cli = cohort_cli::args::Cli::parse();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(cohort_cli::commands::run(cli)) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(1);
        }
    }
}
