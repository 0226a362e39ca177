//! `cohort-agent join TOKEN`: enroll and write the state directory.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use cohort_agent::enroll::{join, JoinOptions};

#[derive(Debug, Args)]
pub struct JoinArgs {
    /// The join token (base64) from `cohort node add`.
    pub token: String,
    /// Where key, certificates and config go.
    #[arg(long, default_value = cohort_agent::config::DEFAULT_STATE_DIR)]
    pub state_dir: PathBuf,
    /// Address the agent API will listen on.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub listen: SocketAddr,
    /// URL the controller calls this agent on. Default: https://<hostname>:<listen port>.
    #[arg(long)]
    pub agent_url: Option<String>,
    /// Host name or address students use for SSH to this node. Default: the hostname.
    #[arg(long)]
    pub ssh_host: Option<String>,
    /// Inclusive host port range for SSH proxy devices, e.g. 20000-29999.
    #[arg(long, default_value = "20000-29999")]
    pub ssh_ports: String,
    /// LXD project the agent works in (default `default`).
    #[arg(long)]
    pub lxd_project: Option<String>,
    /// LXD storage pool (default `cohort`).
    #[arg(long)]
    pub storage_pool: Option<String>,
}

pub async fn run(args: JoinArgs) -> anyhow::Result<i32> {
    let (first, last) = args
        .ssh_ports
        .split_once('-')
        .and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)))
        .filter(|(a, b)| a <= b && *a > 0)
        .with_context(|| {
            format!(
                "--ssh-ports {:?} must be A-B with 0 < A <= B",
                args.ssh_ports
            )
        })?;
    let hostname = nix::unistd::gethostname()
        .context("reading the hostname")?
        .to_string_lossy()
        .into_owned();
    let opts = JoinOptions {
        state_dir: args.state_dir,
        listen: args.listen,
        agent_url: args
            .agent_url
            .unwrap_or_else(|| format!("https://{hostname}:{}", args.listen.port())),
        ssh_host: args.ssh_host.unwrap_or(hostname),
        ssh_port_first: first,
        ssh_port_last: last,
        lxd_project: args.lxd_project,
        storage_pool: args.storage_pool,
    };
    let config = join(&args.token, &opts).await?;
    println!(
        "Enrolled as node {}. Start the agent with:\n  cohort-agent serve --config {}",
        config.node_name,
        config.config_path().display()
    );
    Ok(0)
}
