//! People: `GET /api/v1/me`, `GET|POST /api/v1/me/ssh-keys`, `DELETE /api/v1/me/ssh-keys/{id}`;
//! `GET|POST /api/v1/users` (admin; instructors list), `GET|POST /api/v1/users/{username}/tokens`
//! and `DELETE /api/v1/users/{username}/tokens/{id}` (admin, or the user themself),
//! `POST /api/v1/users/{username}/disable|enable` and `DELETE /api/v1/users/{username}` (admin).

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
    /// When an admin disabled the account: its tokens are refused and its SSH logins removed.
    #[serde(default)]
    pub disabled_at: Option<DateTime<Utc>>,
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

/// `PUT /api/v1/users/{username}/role` (admin): the account's new role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetRole {
    pub role: Role,
}

/// `POST /api/v1/users/{username}/tokens` (body optional).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApiToken {
    /// A label to tell tokens apart, e.g. `laptop`.
    #[serde(default)]
    pub name: Option<String>,
    /// Days until the token expires: 1 to the controller's maximum (`COHORT_TOKEN_MAX_DAYS`,
    /// default 365); default `COHORT_TOKEN_DAYS` (90).
    #[serde(default)]
    pub expires_in_days: Option<u32>,
}

/// A bearer token, shown once; the controller keeps only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiTokenIssued {
    pub username: String,
    pub name: Option<String>,
    pub token: String,
    /// The id to revoke it by.
    #[serde(default)]
    pub id: i64,
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// One of a user's tokens as `GET /api/v1/users/{username}/tokens` lists it (never the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApiToken {
    pub id: i64,
    pub name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// True once `expires_at` has passed: the token is refused (revoke it to remove it).
    pub expired: bool,
}

/// What `DELETE /api/v1/users/{username}?instances=keep|delete` does with the user's instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDeleteInstances {
    /// The default: they stay, owned by the admin who deleted the user, with the former owner's
    /// SSH login removed from those running.
    #[default]
    Keep,
    /// They are deleted (an operation each).
    Delete,
}

/// The answer to deleting a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserDeleted {
    pub username: String,
    /// Instances now owned by the admin who deleted the user (`keep`).
    pub kept: Vec<String>,
    /// Operations deleting the user's instances (`delete`).
    pub operations: Vec<uuid::Uuid>,
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
