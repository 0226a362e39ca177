//! Mutual TLS for the agent's API: the agent's own certificate as server identity, and a client
//! verifier that accepts only certificates chaining to the Cohort CA whose Subject OU is the
//! controller role. Anything else (no certificate, another CA, expired, an agent's own
//! certificate) fails the handshake. The other way round, when the agent calls the controller
//! (image downloads), the server must carry the controller role too: every node's certificate
//! chains to the same CA, so the CA alone would let a stolen node key pass for the controller.
//! The verifiers are `cohort_tls`'s, each a CA chain followed by the role check.

use std::sync::Arc;

use cohort_proto::ROLE_CONTROLLER;
use cohort_tls::{ClientBase, ClientCheck, PeerCheck, ServerBase, ServerCheck};
use rustls::{ClientConfig, ServerConfig};

pub use cohort_tls::{certs_from_pem, key_from_pem, subject_roles, TlsError};

/// The controller role's check, saying in the log which side of a handshake was refused.
fn controller_role(side: &'static str) -> PeerCheck {
    let role = cohort_tls::with_role(ROLE_CONTROLLER);
    Arc::new(move |cert| {
        role(cert).inspect_err(|_| {
            tracing::warn!("refused a {side} certificate without the controller role")
        })
    })
}

/// Server config: `identity` (swapped in place when renewed) as the agent's certificate, clients
/// verified against `ca_pem` and required to carry the controller role.
pub fn server_config(
    identity: Arc<crate::identity::Identity>,
    ca_pem: &[u8],
) -> Result<ServerConfig, TlsError> {
    let verifier = ClientCheck::new(ClientBase::chain(ca_pem)?, controller_role("client"));
    let config = ServerConfig::builder_with_provider(cohort_tls::provider())
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
    let verifier = ServerCheck::new(ServerBase::chain(ca_pem)?, controller_role("server"));
    let chain: Vec<_> = certs_from_pem("node certificate", identity_pem)?;
    let config = ClientConfig::builder_with_provider(cohort_tls::provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(chain, key_from_pem("node key", identity_pem)?)?;
    Ok(config)
}
