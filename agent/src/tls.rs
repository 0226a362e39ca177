//! Mutual TLS for the agent's API: the agent's own certificate as server identity, and a client
//! verifier that accepts only certificates chaining to the Cohort CA whose Subject OU is the
//! controller role. Anything else (no certificate, another CA, expired, an agent's own
//! certificate) fails the handshake. The other way round, when the agent calls the controller
//! (image downloads), the server must carry the controller role too: every node's certificate
//! chains to the same CA, so the CA alone would let a stolen node key pass for the controller.

use std::sync::Arc;

use cohort_proto::ROLE_CONTROLLER;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore,
    ServerConfig, SignatureScheme,
};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// a PEM file holds nothing usable
    #[error("{what}: {message}")]
    Pem { what: String, message: String },
    /// rustls refused the configuration
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// the client verifier could not be built
    #[error("client verifier: {0}")]
    Verifier(String),
}

/// Every certificate in a PEM buffer.
pub fn certs_from_pem(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &*pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what: what.into(),
            message: "no certificate in PEM".into(),
        });
    }
    Ok(certs)
}

/// The private key in a PEM buffer.
pub fn key_from_pem(what: &str, pem: &[u8]) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut &*pem)
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            message: e.to_string(),
        })?
        .ok_or_else(|| TlsError::Pem {
            what: what.into(),
            message: "no private key in PEM".into(),
        })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Server config: `identity` (swapped in place when renewed) as the agent's certificate, clients
/// verified against `ca_pem` and required to carry the controller role.
pub fn server_config(
    identity: Arc<crate::identity::Identity>,
    ca_pem: &[u8],
) -> Result<ServerConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in certs_from_pem("CA certificate", ca_pem)? {
        roots.add(ca)?;
    }
    let inner = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let verifier = Arc::new(ControllerOnly { inner });
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_cert_resolver(identity);
    Ok(config)
}

/// Client config for calls to the controller: `identity_pem` (this node's key and certificate) as
/// client identity; the server must chain to `ca_pem`, match the host name and carry the
/// controller role, which the controller never puts in a node's certificate.
pub fn controller_client_config(
    ca_pem: &[u8],
    identity_pem: &[u8],
) -> Result<ClientConfig, TlsError> {
    let mut roots = RootCertStore::empty();
    for ca in certs_from_pem("CA certificate", ca_pem)? {
        roots.add(ca)?;
    }
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let chain: Vec<_> = certs_from_pem("node certificate", identity_pem)?;
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ControllerServer { inner }))
        .with_client_auth_cert(chain, key_from_pem("node key", identity_pem)?)?;
    Ok(config)
}

/// WebPKI server verification, then the controller-role check.
#[derive(Debug)]
struct ControllerServer {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ControllerServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )?;
        require_controller_role(end_entity, "server")?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Refuses a certificate (already verified against the CA) whose Subject does not carry the
/// controller role: a node's certificate is signed by the same CA and must not pass.
fn require_controller_role(der: &[u8], side: &str) -> Result<(), rustls::Error> {
    if subject_roles(der).iter().any(|r| r == ROLE_CONTROLLER) {
        Ok(())
    } else {
        tracing::warn!("refused a {side} certificate without the controller role");
        Err(rustls::Error::InvalidCertificate(
            CertificateError::ApplicationVerificationFailure,
        ))
    }
}

/// The organizational units in a certificate's Subject.
pub fn subject_roles(der: &[u8]) -> Vec<String> {
    match x509_parser::parse_x509_certificate(der) {
        Ok((_, cert)) => cert
            .subject()
            .iter_organizational_unit()
            .filter_map(|ou| ou.as_str().ok().map(str::to_string))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// WebPKI chain verification, then the controller-role check.
#[derive(Debug)]
struct ControllerOnly {
    inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for ControllerOnly {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.inner
            .verify_client_cert(end_entity, intermediates, now)?;
        require_controller_role(end_entity, "client")?;
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
