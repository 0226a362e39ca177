//! Who is calling: bearer tokens (only their SHA-256 is stored) resolved to a user and role, and
//! the role and ownership rules every route applies.

use cohort_proto::api::users::Role;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::error::{ActionError, ActionResult};
use crate::models::user::User;

/// Prefix of every API token, so leaked tokens are easy to recognise.
const TOKEN_PREFIX: &str = "cohort_";

/// A fresh random secret (token or join secret): 32 random bytes, hex.
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

pub fn new_api_token() -> String {
    format!("{TOKEN_PREFIX}{}", new_secret())
}

pub fn sha256(secret: &str) -> Vec<u8> {
    Sha256::digest(secret.as_bytes()).to_vec()
}

/// The authenticated user behind a request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub user: User,
    pub role: Role,
}

impl Caller {
    pub fn new(user: User) -> Self {
        let role = user.role();
        Caller { user, role }
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }

    /// Refuses callers below `role` (admin > instructor > student).
    pub fn require(&self, role: Role) -> ActionResult<()> {
        if self.role >= role {
            Ok(())
        } else {
            Err(ActionError::Forbidden(format!(
                "this needs the {} role",
                crate::models::user::role_name(role)
            )))
        }
    }

    pub fn name(&self) -> &str {
        &self.user.username
    }
}
