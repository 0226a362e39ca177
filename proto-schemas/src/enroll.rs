//! Enrollment of a node: the join token an admin hands out and the CSR exchange that turns it into
//! the agent's certificate.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Decoded join token. On the wire it is base64 (standard alphabet) of this struct's JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinToken {
    /// Base URL of the controller, e.g. `https://127.0.0.1:8443`.
    pub controller_url: String,
    /// SHA-256 of the controller CA certificate's DER, lowercase hex: the agent pins it.
    pub ca_fingerprint: String,
    pub node_name: String,
    /// One-time secret; the controller keeps only its SHA-256.
    pub secret: String,
    pub expires_at: DateTime<Utc>,
}

/// `POST /api/v1/enroll`: no bearer token; the secret from the join token authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    pub node_name: String,
    pub secret: String,
    /// PEM CSR made by the agent with its own key. Only the public key is used.
    pub csr_pem: String,
    /// URL the controller calls the agent on, e.g. `https://127.0.0.1:9443`.
    pub agent_url: String,
    /// Host name or address students use for SSH to this node's containers.
    pub ssh_host: String,
    /// Inclusive host port range for SSH proxy devices on this node.
    pub ssh_port_first: u16,
    pub ssh_port_last: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollResponse {
    /// The agent's leaf certificate (client+server auth, SAN = node name and agent address).
    pub certificate_pem: String,
    /// The Cohort CA certificate, to verify the controller's client certificate.
    pub ca_pem: String,
}
