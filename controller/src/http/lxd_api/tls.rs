//! The LXD-style API's listener: the controller's own server certificate (the one trust tokens
//! pin), and any client certificate, because `lxc` and pylxd present self-signed ones. The
//! handshake still proves the client holds the key; who it is comes from the trust store by
//! fingerprint, never from the certificate's contents.

use std::sync::Arc;

use actix_web::{web, App, HttpServer};
use cohort_tls::{ClientBase, ClientCheck};
use rustls::pki_types::CertificateDer;

use super::LxdPeer;
use crate::app::server::ServeError;
use crate::app::state::Controller;

fn tls_config(ctl: &Controller) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let pki = &ctl.pki;
    let mut chain_pem = pki.server_cert_pem.clone();
    chain_pem.push_str(pki.ca_pem());
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&e))?;
    let key = rustls_pemfile::private_key(&mut pki.server_key_pem.as_bytes())
        .map_err(|e| tls(&e))?
        .ok_or_else(|| ServeError::Tls("no server key".into()))?;
    // Any client certificate whose key signs the handshake, asked for without being required,
    // so a client without one still gets the untrusted `GET /1.0`.
    let verifier = ClientCheck::new(ClientBase::any_optional(), cohort_tls::no_check());
    rustls::ServerConfig::builder_with_provider(cohort_tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| tls(&e))
}

/// Serves `/1.0` on `listen` until the process ends.
pub async fn serve(ctl: Arc<Controller>, listen: std::net::SocketAddr) -> Result<(), ServeError> {
    let tls = tls_config(&ctl)?;
    let data = web::Data::from(ctl);
    // One set of exec sessions for every worker: a client attaches on other connections.
    let sessions = web::Data::new(super::exec_sessions::ExecSessions::default());
    // Operations answered as done, readable a while on any worker.
    let done = web::Data::new(super::operations::DoneOperations::default());
    tracing::info!(%listen, "serving the LXD-style API");
    HttpServer::new(move || {
        App::new()
            .wrap(actix_web::middleware::from_fn(
                super::untrusted_bodies_refused,
            ))
            .configure(super::configure(
                data.clone(),
                sessions.clone(),
                done.clone(),
            ))
    })
    .on_connect(|conn, ext| {
        use actix_tls::accept::rustls_0_23::TlsStream;
        if let Some(tls) = conn.downcast_ref::<TlsStream<actix_web::rt::net::TcpStream>>() {
            if let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
                ext.insert(LxdPeer(cert.to_vec()));
            }
        }
    })
    .bind_rustls_0_23(listen, tls)?
    .run()
    .await?;
    Ok(())
}
