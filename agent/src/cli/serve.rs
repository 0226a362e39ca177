//! `cohort-agent serve --config FILE`: check LXD, load the certificates, serve until SIGTERM or
//! Ctrl-C.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use cohort_agent::identity::{Identity, IdentityFiles};
use cohort_agent::{AgentConfig, Node};

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
    let node = Arc::new(Node::connect(config).await?);
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
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
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
