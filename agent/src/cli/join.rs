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
    /// The daemon's unix socket, written into the config. Default: the first that exists of
    /// `$INCUS_DIR`'s, `$LXD_DIR`'s, Incus's, LXD's and the LXD snap's (Incus where both run).
    #[arg(long, env = "COHORT_AGENT_LXD_SOCKET")]
    pub lxd_socket: Option<PathBuf>,
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
    if let Some(warning) = ephemeral_overlap(
        first,
        last,
        &std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default(),
    ) {
        eprintln!("Warning: {warning}");
    }
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
        lxd_socket: args.lxd_socket,
    };
    let config = join(&args.token, &opts).await?;
    println!(
        "Enrolled as node {} on {}. Start the agent with:\n  cohort-agent serve --config {}",
        config.node_name,
        config.lxd_socket().display(),
        config.config_path().display()
    );
    Ok(0)
}

/// A warning when the SSH ports overlap the kernel's ephemeral ports (`ip_local_port_range`,
/// given as its file's text): an outgoing connection can hold one of those ports for as long as
/// it lives, and a student's proxy device then cannot listen on it.
fn ephemeral_overlap(first: u16, last: u16, port_range: &str) -> Option<String> {
    let mut parts = port_range.split_whitespace().map(|p| p.parse::<u16>().ok());
    let (low, high) = (parts.next()??, parts.next()??);
    (first <= high && low <= last).then(|| {
        format!(
            "--ssh-ports {first}-{last} overlaps the kernel's ephemeral ports {low}-{high}: an \
             outgoing connection can take one of them and that student's container then cannot \
             be reached. Use ports below {low}, or reserve these with \
             `sysctl -w net.ipv4.ip_local_reserved_ports={first}-{last}`."
        )
    })
}

#[cfg(test)]
mod tests {
    use super::ephemeral_overlap;

    #[test]
    fn ssh_ports_inside_the_ephemeral_range_are_warned_about() {
        let linux = "32768\t60999\n";
        assert_eq!(ephemeral_overlap(22000, 22099, linux), None);
        assert_eq!(ephemeral_overlap(61000, 61099, linux), None);
        let warning = ephemeral_overlap(32700, 32800, linux).expect("overlap at the low end");
        assert!(warning.contains("32768-60999"), "{warning}");
        assert!(
            warning.contains("ip_local_reserved_ports=32700-32800"),
            "{warning}"
        );
        assert!(ephemeral_overlap(40000, 40099, linux).is_some());
        assert_eq!(
            ephemeral_overlap(40000, 40099, ""),
            None,
            "unreadable: no warning"
        );
    }
}
