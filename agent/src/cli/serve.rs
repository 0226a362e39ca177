//! `cohort-agent serve --config FILE`: check LXD, load the certificates, serve until SIGTERM or
//! Ctrl-C.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use cohort_agent::identity::{Identity, IdentityFiles};
use cohort_agent::lxd::server::ServerError;
use cohort_agent::lxd::LxdError;
use cohort_agent::node::NodeError;
use cohort_agent::{AgentConfig, Node};

/// The longest wait between two tries at a daemon that is not up yet.
const DAEMON_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn run(config_path: &Path) -> anyhow::Result<i32> {
    let config = AgentConfig::load(config_path)?;
    let read = |p: std::path::PathBuf| {
        std::fs::read(&p)
            .with_context(|| format!("reading {} (run cohort-agent join first)", p.display()))
    };
    let identity = Arc::new(
        Identity::load(
            IdentityFiles {
                key: config.key_path(),
                cert: config.cert_path(),
            },
            &config.node_name,
        )
        .context("loading the node's key and certificate (run cohort-agent join first)")?,
    );
    let tls = cohort_agent::tls::server_config(identity.clone(), &read(config.ca_path())?)?;
    let listen = config.listen;
    let metrics_listen = config.metrics_listen;
    if let Some(addr) = metrics_listen {
        anyhow::ensure!(
            addr.ip().is_loopback(),
            "metrics_listen {addr} is not a loopback address: plain-HTTP metrics stay on this host"
        );
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let node = tokio::select! {
        node = connect_when_up(config) => Arc::new(node?),
        _ = tokio::signal::ctrl_c() => return Ok(0),
        _ = term.recv() => return Ok(0),
    };
    // This process owns the state directory now: a `.partial` there is a killed run's.
    node.images.sweep_partials();
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    tracing::info!(
        %listen,
        node = node.config.node_name,
        daemon = node.daemon.describe(),
        project = node.config.lxd_project,
        "agent serving"
    );
    let metrics = match metrics_listen {
        Some(addr) => {
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listening on {addr} (metrics_listen)"))?;
            tracing::info!(%addr, "plain metrics listener");
            Some(tokio::spawn(cohort_agent::api::serve_metrics(
                l,
                node.clone(),
            )))
        }
        None => None,
    };
    tokio::select! {
        served = cohort_agent::api::serve(listener, Arc::new(tls), identity, node) => served?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; stopping"),
        _ = term.recv() => tracing::info!("SIGTERM; stopping"),
    }
    if let Some(m) = metrics {
        m.abort();
    }
    Ok(0)
}

/// Connects to the daemon, waiting while its socket does not answer: at boot the agent may start
/// before LXD or Incus (a snap's daemon starts late), and a service that exits and is restarted
/// every few seconds only fills the journal. Any other refusal (missing extensions, no storage
/// pool, a bad `[network]`) is a configuration to fix and ends the process at once.
async fn connect_when_up(config: AgentConfig) -> anyhow::Result<Node> {
    let mut pause = std::time::Duration::from_millis(500);
    let mut tries = 0u32;
    loop {
        match Node::connect(config.clone()).await {
            Ok(node) => {
                if tries > 0 {
                    tracing::info!(tries, "the daemon answers now");
                }
                return Ok(node);
            }
            Err(NodeError::Server(ServerError::Lxd(LxdError::Unreachable { socket, message }))) => {
                tries += 1;
                // Every try at first, then one line a minute or so: the state is the same.
                if tries <= 3 || tries.is_multiple_of(6) {
                    tracing::warn!(%socket, error = %message, tries, "waiting for the daemon: its socket does not answer yet");
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(DAEMON_RETRY_MAX);
            }
            Err(e) => return Err(e.into()),
        }
    }
}
