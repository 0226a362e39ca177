//! Mutual TLS to the agents: the controller's client certificate, and the agent's server
//! certificate checked against its pinned fingerprints (its live certificates) and chained to
//! the Cohort CA. [`MtlsConnector`] keeps one client per (node, pins).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::nodes::pki::{fingerprint, Pki};

use super::http::HttpAgent;
use super::{AgentConnector, AgentError, AgentTarget, NodeAgent};

/// The real connector: one reqwest client per (node, pin), kept for reuse.
pub struct MtlsConnector {
    identity_pem: Vec<u8>,
    ca_pem: String,
    clients: Mutex<HashMap<AgentTarget, reqwest::Client>>,
}

impl MtlsConnector {
    pub fn new(pki: &Pki) -> Self {
        let mut identity_pem = pki.client_cert_pem.clone().into_bytes();
        identity_pem.extend_from_slice(pki.ca_pem().as_bytes());
        identity_pem.extend_from_slice(pki.client_key_pem.as_bytes());
        MtlsConnector {
            identity_pem,
            ca_pem: pki.ca_pem().to_string(),
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn build(&self, pins: &[String]) -> Result<reqwest::Client, AgentError> {
        let tls = |e: &dyn std::fmt::Display| AgentError::Tls(e.to_string());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut self.ca_pem.as_bytes()) {
            roots.add(cert.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
        }
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| tls(&e))?;
        let certs: Vec<CertificateDer<'static>> =
            rustls_pemfile::certs(&mut self.identity_pem.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| tls(&e))?;
        let key = rustls_pemfile::private_key(&mut self.identity_pem.as_slice())
            .map_err(|e| tls(&e))?
            .ok_or_else(|| AgentError::Tls("no client key".into()))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                pins: pins.to_vec(),
                chain,
            }))
            .with_client_auth_cert(certs, key)
            .map_err(|e| tls(&e))?;
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(600))
            .build()
            .map_err(|e| tls(&e))
    }
}

impl AgentConnector for MtlsConnector {
    fn connect(&self, target: &AgentTarget) -> Result<Arc<dyn NodeAgent>, AgentError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let client = match clients.get(target) {
            Some(c) => c.clone(),
            None => {
                let c = self.build(&target.pins)?;
                clients.insert(target.clone(), c.clone());
                c
            }
        };
        Ok(Arc::new(HttpAgent {
            client,
            base: format!("{}/v1", target.url.trim_end_matches('/')),
        }))
    }
}

/// Accepts only a pinned certificate, and only if it also chains to the Cohort CA.
#[derive(Debug)]
struct PinnedVerifier {
    pins: Vec<String>,
    chain: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.pins.contains(&fingerprint(end_entity)) {
            return Err(rustls::Error::General(
                "agent certificate does not match the pinned fingerprint".into(),
            ));
        }
        self.chain
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}
