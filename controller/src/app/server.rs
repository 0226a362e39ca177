//! `serve`: the HTTPS API (rustls, optional client certificates so agents can fetch images with
//! their node certificate) plus the job worker, the queue, the node poller and the reclaimer.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;

use crate::app::loops::supervise;
use crate::app::state::Controller;
use crate::http::api::{self, PeerCertificate};
use crate::instances::page_cache;
use crate::jobs::worker;
use crate::nodes::pki::{fingerprint, Pki};
use crate::placement::queue;
use crate::reclaim;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// the TLS configuration could not be built from the state directory's files
    #[error("tls: {0}")]
    Tls(String),
    /// the listener could not be bound or the server failed
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// The server's TLS: the controller's server certificate; client certificates are optional and,
/// when given, must chain to the Cohort CA.
pub fn tls_config(pki: &Pki) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pki.ca_pem().as_bytes()) {
        roots.add(cert.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| tls(&e))?;
    let mut chain_pem = pki.server_cert_pem.clone();
    chain_pem.push_str(pki.ca_pem());
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&e))?;
    let key = rustls_pemfile::private_key(&mut pki.server_key_pem.as_bytes())
        .map_err(|e| tls(&e))?
        .ok_or_else(|| ServeError::Tls("no server key".into()))?;
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls(&e))
}

/// The loop that writes the failed sign-ins' summary of each minute that ended quietly.
const FAILURE_SUMMARY: &str = "failure_summary";

async fn failure_summaries(ctl: Arc<Controller>) {
    crate::app::fixed_rate::on_beat(Duration::from_secs(10), || async {
        ctl.loops.tick(FAILURE_SUMMARY);
        if let Err(e) = crate::accounts::sign_in::flush_failure_summary(&ctl).await {
            tracing::warn!(error = %e, "writing the failed sign-ins' summary failed");
        }
    })
    .await;
}

/// Starts the background loops and serves until the process ends.
pub async fn serve(ctl: Arc<Controller>) -> Result<(), ServeError> {
    let tls = tls_config(&ctl.pki)?;
    crate::app::health::warn_on_clock_skew(&ctl).await;
    // Each loop may be silent for a few of its rounds (a pass can be slow) before it is stale.
    let allow = |every_s: u64| Some(Duration::from_secs((every_s * 5).max(60)));
    let c = &ctl.config;
    let (queue_s, reclaim_s) = (c.placement.queue_interval_s, c.reclaim.interval_s);
    supervise(ctl.clone(), worker::LOOP, allow(1), worker::run);
    supervise(ctl.clone(), queue::LOOP, allow(queue_s), queue::run);
    // The poller and the pruner tick nothing of their own: only their deaths are seen.
    supervise(ctl.clone(), "poller", None, crate::app::poller::run);
    supervise(ctl.clone(), "pruner", None, crate::app::prune::run);
    supervise(ctl.clone(), reclaim::LOOP, allow(reclaim_s), reclaim::run);
    supervise(ctl.clone(), page_cache::LOOP, allow(30), |ctl| {
        page_cache::run(ctl, Duration::from_secs(30))
    });
    supervise(ctl.clone(), FAILURE_SUMMARY, allow(10), failure_summaries);
    // A jobs pass waits at most 90 s for its nodes.
    supervise(
        ctl.clone(),
        crate::batch::LOOP,
        allow(30),
        crate::batch::run,
    );
    let sweep_s = c.server.archive_sweep_s;
    supervise(
        ctl.clone(),
        crate::courses::archive_sweep::LOOP,
        allow(sweep_s),
        crate::courses::archive_sweep::run,
    );
    let listen = ctl.config.server.listen;
    let lxd = ctl
        .config
        .server
        .lxd_listen
        .map(|addr| crate::http::lxd_api::tls::serve(ctl.clone(), addr));
    let data = web::Data::from(ctl);
    tracing::info!(%listen, "serving the API");
    let main = HttpServer::new(move || {
        App::new()
            // HTTPS only from the first answer on: a browser never tries plain HTTP here again.
            .wrap(actix_web::middleware::DefaultHeaders::new().add((
                actix_web::http::header::STRICT_TRANSPORT_SECURITY,
                "max-age=31536000",
            )))
            .wrap_fn(api::count_status)
            .configure(api::configure(data.clone()))
    })
    .on_connect(|conn, ext| {
        use actix_tls::accept::rustls_0_23::TlsStream;
        if let Some(tls) = conn.downcast_ref::<TlsStream<actix_web::rt::net::TcpStream>>() {
            if let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                ext.insert(PeerCertificate(fingerprint(cert)));
            }
        }
    })
    .bind_rustls_0_23(listen, tls)?
    .run();
    match lxd {
        Some(lxd) => {
            tokio::try_join!(async { Ok(main.await?) }, lxd)?;
        }
        None => main.await?,
    }
    Ok(())
}
