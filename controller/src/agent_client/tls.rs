//! Mutual TLS to the agents: the controller's client certificate, and the agent's server
//! certificate checked against its pinned fingerprints (its live certificates) and chained to
//! the Cohort CA. [`MtlsConnector`] keeps one client per (node, pins).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cohort_tls::{ServerBase, ServerCheck};

use crate::app::config::AgentClientConfig;
use crate::nodes::pki::Pki;

use super::http::HttpAgent;
use super::{AgentConnector, AgentError, AgentTarget, NodeAgent};

/// The real connector: one reqwest client per (node, pin), kept for reuse.
pub struct MtlsConnector {
    identity_pem: Vec<u8>,
    ca_pem: String,
    clients: Mutex<HashMap<AgentTarget, reqwest::Client>>,
    timeouts: AgentClientConfig,
}

impl MtlsConnector {
    /// A connector whose calls keep to `timeouts` (see [`AgentClientConfig`]).
    pub fn new(pki: &Pki, timeouts: AgentClientConfig) -> Self {
        let mut identity_pem = pki.client_cert_pem.clone().into_bytes();
        identity_pem.extend_from_slice(pki.ca_pem().as_bytes());
        identity_pem.extend_from_slice(pki.client_key_pem.as_bytes());
        MtlsConnector {
            identity_pem,
            ca_pem: pki.ca_pem().to_string(),
            clients: Mutex::new(HashMap::new()),
            timeouts,
        }
    }

    fn build(&self, pins: &[String]) -> Result<reqwest::Client, AgentError> {
        let tls = |e: &dyn std::fmt::Display| AgentError::Tls(e.to_string());
        // The pin first (only the agent's live certificates), then the chain to the Cohort CA.
        let base = ServerBase::chain(self.ca_pem.as_bytes()).map_err(|e| tls(&e))?;
        let verifier = ServerCheck::new(base, cohort_tls::pinned(pins.to_vec()));
        let certs = cohort_tls::certs_from_pem("controller client certificate", &self.identity_pem)
            .map_err(|e| tls(&e))?;
        let key = cohort_tls::key_from_pem("controller client key", &self.identity_pem)
            .map_err(|e| tls(&e))?;
        let config = rustls::ClientConfig::builder_with_provider(cohort_tls::provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(&e))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(certs, key)
            .map_err(|e| tls(&e))?;
        let secs = std::time::Duration::from_secs;
        // The client's deadline is an ordinary call's; the calls that wait on the daemon or
        // stream set a longer one of their own (`HttpAgent`). A peer gone dark under one of
        // those is still found soon: keepalive probes end a connection idle while the daemon
        // works (a create) in about 25 s, and the user timeout one whose sent bytes go
        // unacknowledged (a tarball streamed into a dark target) in 30 s.
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .connect_timeout(secs(self.timeouts.connect_timeout_s))
            .timeout(secs(self.timeouts.request_timeout_s))
            .tcp_keepalive(secs(10))
            .tcp_keepalive_interval(secs(5))
            .tcp_keepalive_retries(3)
            .tcp_user_timeout(secs(30))
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
            timeouts: self.timeouts,
            base: format!("{}/v1", target.url.trim_end_matches('/')),
        }))
    }
}
