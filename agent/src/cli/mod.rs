//! The `cohort-agent` command line: `join`, `serve`, `doctor`, `gpus`, `cap-library`. Each verb is one file; they
//! use anyhow, the library does not.

mod doctor;
mod gpus;
mod join;
mod serve;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "cohort-agent",
    version,
    about = "Cohort's node agent: LXD, GPUs and host facts, served to the controller over mutual TLS"
)]
pub struct Cli {
    /// Log lines as human-readable text or as one JSON object a line.
    #[arg(long, global = true, env = "COHORT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Enroll this node with the controller using a join token from `cohort node add`.
    Join(join::JoinArgs),
    /// Serve the agent API.
    Serve {
        /// The agent config (written by `join` as <state-dir>/agent.toml).
        #[arg(long, default_value = "/var/lib/cohort-agent/agent.toml")]
        config: PathBuf,
    },
    /// Check that this machine can run Cohort's containers; exits non-zero on a FAIL.
    Doctor {
        /// The agent config; without it, defaults (and COHORT_AGENT_* variables) are used.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Path of libnvidia-ml.so (overrides the config).
        #[arg(long)]
        nvml_library: Option<PathBuf>,
    },
    /// List this node's GPUs as NVML sees them.
    Gpus {
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// Path of libnvidia-ml.so (overrides the config).
        #[arg(long)]
        nvml_library: Option<PathBuf>,
        /// The agent config, for its nvml_library.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Write the GPU memory cap library built with this agent (the one it installs into
    /// containers sharing a GPU) to PATH, for `scripts/gpu-check` on a host without Cohort.
    CapLibrary {
        /// Where to write it.
        path: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// The config at `path`, or defaults with environment overrides.
fn config_or_default(path: Option<&std::path::Path>) -> anyhow::Result<cohort_agent::AgentConfig> {
    match path {
        Some(p) => Ok(cohort_agent::AgentConfig::load(p)?),
        None => {
            let mut c = cohort_agent::AgentConfig::new("unenrolled");
            c.apply_env(|k| std::env::var(k).ok())?;
            Ok(c)
        }
    }
}

/// Runs a parsed command; the exit code it returns is the process's.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Join(args) => join::run(args).await,
        Command::Serve { config } => serve::run(&config).await,
        Command::Doctor {
            config,
            nvml_library,
        } => {
            let mut config = config_or_default(config.as_deref())?;
            if nvml_library.is_some() {
                config.nvml_library = nvml_library;
            }
            doctor::run(&config).await
        }
        Command::Gpus {
            format,
            nvml_library,
            config,
        } => {
            let config = config_or_default(config.as_deref())?;
            gpus::run(format, nvml_library.or(config.nvml_library))
        }
        Command::CapLibrary { path } => {
            std::fs::write(&path, cohort_agent::guest::cuda_cap::LIBRARY)?;
            Ok(0)
        }
    }
}
