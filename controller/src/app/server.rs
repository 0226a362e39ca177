//! `serve`: the HTTPS API (rustls, optional client certificates so agents can fetch images with
//! their node certificate) plus the job worker, the queue, the node poller and the reclaimer.

use std::sync::Arc;
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use rustls::pki_types::CertificateDer;
use rustls::server::WebPkiClientVerifier;

use crate::app::state::Controller;
use crate::http::api::{self, PeerCertificate};
use crate::nodes::pki::{fingerprint, Pki};

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

/// Starts the background loops and serves until the process ends.
pub async fn serve(ctl: Arc<Controller>) -> Result<(), ServeError> {
    let tls = tls_config(&ctl.pki)?;
    tokio::spawn(crate::jobs::worker::run(ctl.clone()));
    tokio::spawn(crate::placement::queue::run(ctl.clone()));
    tokio::spawn(crate::app::poller::run(ctl.clone()));
    tokio::spawn(crate::reclaim::run(ctl.clone()));
    tokio::spawn(crate::app::prune::run(ctl.clone()));
    tokio::spawn(crate::instances::page_cache::run(
        ctl.clone(),
        Duration::from_secs(30),
    ));
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
