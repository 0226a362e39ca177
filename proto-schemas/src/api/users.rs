//! People: `GET /api/v1/me`, `GET|POST /api/v1/me/ssh-keys`, `DELETE /api/v1/me/ssh-keys/{id}`;
//! `GET|POST /api/v1/users` (admin; instructors list), `POST /api/v1/users/{username}/tokens`
//! (admin, or the user themself).

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::instances::Instance;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Student,
    Instructor,
    Admin,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct User {
    pub username: String,
    pub role: Role,
    pub full_name: Option<String>,
    pub email: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// `POST /api/v1/users` (admin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    /// Linux username rules: 1-32 of a-z, 0-9, '_' and '-', starting with a letter or '_'.
    pub username: String,
    pub role: Role,
    #[serde(default)]
    pub full_name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
}

/// `POST /api/v1/users/{username}/tokens` (body optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiToken {
    /// A label to tell tokens apart, e.g. `laptop`.
    #[serde(default)]
    pub name: Option<String>,
}

/// A bearer token, shown once; the controller keeps only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiTokenIssued {
    pub username: String,
    pub name: Option<String>,
    pub token: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshKey {
    pub id: i64,
    /// `SHA256:...` as `ssh-keygen -l` prints it.
    pub fingerprint: String,
    pub public_key: String,
    pub created_at: DateTime<Utc>,
}

/// `POST /api/v1/me/ssh-keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddSshKey {
    /// One OpenSSH public key line: ed25519, ecdsa or rsa >= 2048 bits, no options.
    pub public_key: String,
}

/// `GET /api/v1/me`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Me {
    pub user: User,
    pub instances: Vec<Instance>,
    pub ssh_keys: Vec<SshKey>,
}
