//! Trust for the LXD-style API (the real `lxc` client and pylxd):
//! `GET|POST /api/v1/lxd/trust` and `DELETE /api/v1/lxd/trust/{name}` (the user, or an admin).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `POST /api/v1/lxd/trust`: a token `lxc remote add REMOTE TOKEN` accepts once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTrustToken {
    /// The client's name, as `lxc config trust add NAME` takes it; names the certificate later.
    pub name: String,
    /// The user the certificate acts as; default the caller. Only admins name someone else.
    #[serde(default)]
    pub user: Option<String>,
}

/// A trust token, shown once: LXD's format (base64 of JSON with `client_name`, `fingerprint`,
/// `addresses`, `secret`, `expires_at`); the controller keeps only the secret's SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustTokenIssued {
    pub name: String,
    pub user: String,
    pub token: String,
    pub expires_at: DateTime<Utc>,
}

/// A trusted client certificate, or a token not redeemed yet (`fingerprint` absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustEntry {
    pub name: String,
    pub user: String,
    /// SHA-256 of the certificate, hex; absent for a pending token.
    #[serde(default)]
    pub fingerprint: Option<String>,
    pub created_at: DateTime<Utc>,
    /// When a pending token stops being accepted.
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}
