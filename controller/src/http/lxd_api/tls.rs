//! The LXD-style API's listener: the controller's own server certificate (the one trust tokens
//! pin), and any client certificate, because `lxc` and pylxd present self-signed ones. The
//! handshake still proves the client holds the key; who it is comes from the trust store by
//! fingerprint, never from the certificate's contents.

use std::sync::Arc;

use actix_web::{web, App, HttpServer};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::LxdPeer;
use crate::app::server::ServeError;
use crate::app::state::Controller;

/// Accepts any client certificate whose key signs the handshake; asks for one without
/// requiring it, so a client without one still gets the untrusted `GET /1.0`.
#[derive(Debug)]
struct AnyClientCertificate(Arc<CryptoProvider>);

impl ClientCertVerifier for AnyClientCertificate {
    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config(ctl: &Controller) -> Result<rustls::ServerConfig, ServeError> {
    let tls = |e: &dyn std::fmt::Display| ServeError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let pki = &ctl.pki;
    let mut chain_pem = pki.server_cert_pem.clone();
    chain_pem.push_str(pki.ca_pem());
    let chain: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| tls(&e))?;
    let key = rustls_pemfile::private_key(&mut pki.server_key_pem.as_bytes())
        .map_err(|e| tls(&e))?
        .ok_or_else(|| ServeError::Tls("no server key".into()))?;
    rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(Arc::new(AnyClientCertificate(provider)))
        .with_single_cert(chain, key)
        .map_err(|e| tls(&e))
}

/// Serves `/1.0` on `listen` until the process ends.
pub async fn serve(ctl: Arc<Controller>, listen: std::net::SocketAddr) -> Result<(), ServeError> {
    let tls = tls_config(&ctl)?;
    let data = web::Data::from(ctl);
    // One set of exec sessions for every worker: a client attaches on other connections.
    let sessions = web::Data::new(super::exec_sessions::ExecSessions::default());
    tracing::info!(%listen, "serving the LXD-style API");
    HttpServer::new(move || {
        App::new()
            .wrap(actix_web::middleware::from_fn(
                super::untrusted_bodies_refused,
            ))
            .configure(super::configure(data.clone(), sessions.clone()))
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
