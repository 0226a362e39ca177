//! The agent API (`cohort_proto::agent`) served to the controller under `/v1` over mutual TLS:
//! an accept loop with tokio-rustls, one hyper connection per client, routing in `routes`.

mod error;
mod metrics;
mod relay;
mod routes;
mod stream;
mod tunnel;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use error::ApiError;

use crate::identity::Identity;
use crate::node::Node;

/// Longest a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves the API on `listener` until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    identity: Arc<Identity>,
    node: Arc<Node>,
) -> std::io::Result<()> {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let (tcp, peer) = listener.accept().await?;
        let acceptor = acceptor.clone();
        let node = node.clone();
        let identity = identity.clone();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::info!(%peer, "TLS handshake refused: {e}");
                    return;
                }
                Err(_) => {
                    tracing::info!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            let service = service_fn(move |req| {
                let node = node.clone();
                let identity = identity.clone();
                async move { Ok::<_, Infallible>(routes::handle(&node, &identity, req).await) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                // The JupyterLab tunnel (`tunnel`) takes the connection over after its 101.
                .with_upgrades()
                .await
            {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
}

/// Serves only `GET /metrics`, in plain HTTP, on `listener` (the optional loopback listener for a
/// local Prometheus or node exporter; everything else stays behind mutual TLS).
pub async fn serve_metrics(listener: TcpListener, node: Arc<Node>) -> std::io::Result<()> {
    loop {
        let (tcp, peer) = listener.accept().await?;
        let node = node.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let node = node.clone();
                async move {
                    let resp =
                        if req.method() == hyper::Method::GET && req.uri().path() == "/metrics" {
                            metrics::render(&node).await
                        } else {
                            Err(ApiError::new(
                                hyper::StatusCode::NOT_FOUND,
                                "not_found",
                                "only GET /metrics is served here",
                            ))
                        };
                    Ok::<_, Infallible>(resp.unwrap_or_else(|e| routes::json(e.status, &e.body())))
                }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(tcp), service)
                .await
            {
                tracing::debug!(%peer, "metrics connection ended: {e}");
            }
        });
    }
}
