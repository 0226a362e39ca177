//! `cohort-agent`: parse the command line, set up logging, run the verb.

mod cli;

use clap::Parser;

#[tokio::main]
async fn main() {
    let cli = cli::Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("COHORT_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr);
    match cli.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs.json().init(),
    }
    match cli::run(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("Error: {e:#}");
            std::process::exit(1);
        }
    }
}
