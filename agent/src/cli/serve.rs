//! `cohort-agent serve --config FILE`: check LXD, load the certificates, serve until SIGTERM or
//! Ctrl-C.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use cohort_agent::{AgentConfig, Node};

pub async fn run(config_path: &Path) -> anyhow::Result<i32> {
    let config = AgentConfig::load(config_path)?;
    let read = |p: std::path::PathBuf| {
        std::fs::read(&p)
            .with_context(|| format!("reading {} (run cohort-agent join first)", p.display()))
    };
    let tls = cohort_agent::tls::server_config(
        &read(config.cert_path())?,
        &read(config.key_path())?,
        &read(config.ca_path())?,
    )?;
    let listen = config.listen;
    let node = Node::connect(config).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    tracing::info!(
        %listen,
        node = node.config.node_name,
        lxd = node.health().lxd_version,
        project = node.config.lxd_project,
        "agent serving"
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        served = cohort_agent::api::serve(listener, Arc::new(tls), Arc::new(node)) => served?,
        _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; stopping"),
        _ = term.recv() => tracing::info!("SIGTERM; stopping"),
    }
    Ok(0)
}
