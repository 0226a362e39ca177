//! Who is calling: bearer tokens (only their SHA-256 is stored) resolved to a user and role, and
//! the role and ownership rules every route applies.

use cohort_proto::api::users::Role;
use diesel::pg::PgConnection;
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::db::models::api_token::ApiToken;
use crate::db::models::lxd_trust::LxdCertificate;
use crate::db::models::portal_session::PortalSession;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};

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

/// The credential a request presented, not checked yet: a bearer token or a portal session's
/// cookie (only their SHA-256, which is all the database keeps), or the fingerprint of an `lxc`
/// client certificate. Actions resolve it with [`Bearer::caller`] on the connection they answer
/// with, so a request costs one pool checkout (each one pings PostgreSQL), not one to
/// authenticate and one to answer; the only way from a `Bearer` to a [`Caller`] is through the
/// database. Pages and `lxc` call the very actions the REST API calls: one place decides who
/// may do what.
#[derive(Debug, Clone)]
pub struct Bearer {
    credential: Credential,
}

#[derive(Debug, Clone)]
enum Credential {
    /// SHA-256 of an API token.
    Token(Vec<u8>),
    /// SHA-256 of a portal session cookie's secret.
    PortalSession(Vec<u8>),
    /// SHA-256 of a client certificate the LXD-style API's TLS handshake proved the key of.
    LxdCertificate(String),
}

impl Bearer {
    pub fn new(token: &str) -> Self {
        Bearer {
            credential: Credential::Token(sha256(token)),
        }
    }

    /// The secret of a portal session cookie.
    pub fn portal_session(secret: &str) -> Self {
        Bearer {
            credential: Credential::PortalSession(sha256(secret)),
        }
    }

    /// A client certificate (by fingerprint) of the LXD-style API: it acts as the user its trust
    /// entry binds it to.
    pub fn lxd_certificate(fingerprint: &str) -> Self {
        Bearer {
            credential: Credential::LxdCertificate(fingerprint.to_string()),
        }
    }

    /// Whether the token presented is `secret` (compared by hash, like every token).
    pub fn is(&self, secret: &str) -> bool {
        matches!(&self.credential, Credential::Token(hash) if *hash == sha256(secret))
    }

    /// The user behind the credential; an unknown, expired or revoked token, session or
    /// certificate, or one of a disabled user, is a 401.
    pub fn caller(&self, conn: &mut PgConnection) -> ActionResult<Caller> {
        match &self.credential {
            Credential::Token(hash) => ApiToken::user_for_hash(conn, hash)?
                .map(Caller::new)
                .ok_or_else(|| ActionError::Unauthenticated("invalid API token".into())),
            Credential::PortalSession(hash) => PortalSession::live(conn, hash)?
                .map(|(_, user)| Caller::new(user))
                .ok_or_else(|| ActionError::Unauthenticated("session expired".into())),
            Credential::LxdCertificate(fingerprint) => LxdCertificate::user_for(conn, fingerprint)?
                .map(Caller::new)
                .ok_or_else(|| ActionError::Unauthenticated("untrusted certificate".into())),
        }
    }
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
                crate::db::models::user::role_name(role)
            )))
        }
    }

    pub fn name(&self) -> &str {
        &self.user.username
    }
}
