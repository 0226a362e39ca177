//! Portal sign-in: a username and password checked against the user's argon2id hash (or, for a
//! roster student who has not set one, the first-login password their instructor was shown),
//! else against the university's directory ([`crate::accounts::directory`]); a new session on success.
//! Failures count against the source and account together, and against the source alone with a
//! much larger budget ([`crate::accounts::auth_failures`]); they are audited as `failed_sign_in`,
//! a flood past the minute's cap summed up in one row ([`crate::accounts::failure_audit`]).

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio::sync::Semaphore;

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{new_secret, sha256, Caller};
use crate::accounts::directory::{self, DirectoryUser};
use crate::app::state::Controller;
use crate::courses::password as crypt;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::portal_session::PortalSession;
use crate::db::models::sign_in_password::SignInPassword;
use crate::db::models::user::{role_name, NewUser, User};
use crate::error::{ActionError, ActionResult};
use cohort_proto::api::users::Role;

/// Shortest password a user may set.
pub const MIN_PASSWORD_LEN: usize = 10;
/// Longest: argon2 hashes any length, but a megabyte password is only a way to burn CPU.
pub const MAX_PASSWORD_LEN: usize = 1024;

/// A new session: the cookie's secret (shown to the browser once) and when it ends.
#[derive(Debug)]
pub struct NewSession {
    pub secret: String,
    pub expires_at: DateTime<Utc>,
}

/// The argon2id PHC string of `password` (argon2's defaults: 19 MiB, 2 passes, OWASP's minimum).
pub fn hash_password(password: &str) -> ActionResult<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| ActionError::Internal(format!("hashing a password: {e}")))
}

fn argon2_matches(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

/// What a password is checked against, read from the database before any hashing: the user's
/// own argon2id hash and the roster's crypt(3) first-login hash.
struct Hashes {
    own: Option<String>,
    first_login: Option<String>,
}

impl Hashes {
    fn of(conn: &mut PgConnection, user: &User) -> ActionResult<Hashes> {
        Ok(Hashes {
            own: SignInPassword::hash_of(conn, user.id)?,
            first_login: user.password_hash.clone(),
        })
    }

    /// Whether `password` is theirs: their own argon2id password when they have set one, else
    /// the roster's first-login password. Exactly one argon2 verification whatever the account
    /// holds (a dummy hash's where it holds none, and for no account at all), so the time taken
    /// tells nothing of which.
    fn matches(&self, password: &str) -> bool {
        match &self.own {
            Some(hash) => argon2_matches(password, hash),
            None => {
                argon2_matches(password, dummy_hash());
                self.first_login
                    .as_deref()
                    .is_some_and(|hash| crypt::verify(password, hash))
            }
        }
    }
}

/// An argon2id hash no password matches, verified against instead of a hash nobody has.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| hash_password(&new_secret()).unwrap_or_default())
}

/// Checks `password` against `hashes` on a blocking thread, holding no database connection, at
/// most as many at once as the machine has cores: a flood of sign-ins costs CPU and at most that
/// many argon2 memories, never the pool everyone else needs.
async fn verify(hashes: Hashes, password: String) -> ActionResult<bool> {
    static HASHING: OnceLock<Arc<Semaphore>> = OnceLock::new();
    let permits = HASHING.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Arc::new(Semaphore::new(cores))
    });
    let _permit = permits
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| ActionError::Internal(e.to_string()))?;
    tokio::task::spawn_blocking(move || hashes.matches(&password))
        .await
        .map_err(|e| ActionError::Internal(e.to_string()))
}

/// Whether `password` is `user`'s (a password change's proof of the current one).
async fn password_matches(ctl: &Controller, user: &User, password: &str) -> ActionResult<bool> {
    let user = user.clone();
    let hashes = ctl.db(move |conn| Hashes::of(conn, &user)).await?;
    verify(hashes, password.to_string()).await
}

/// Checks a password's length; `field` names the form field.
pub fn check_new_password(field: &str, password: &str) -> ActionResult<()> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_LEN {
        return Err(ActionError::invalid(
            field,
            format!("a password needs at least {MIN_PASSWORD_LEN} characters"),
        ));
    }
    if password.len() > MAX_PASSWORD_LEN {
        return Err(ActionError::invalid(
            field,
            format!("a password has at most {MAX_PASSWORD_LEN} bytes"),
        ));
    }
    Ok(())
}

/// Longest part of a username a throttle or audit key keeps (a key per typed name is bounded).
const KEY_CHARS: usize = 128;

/// Counts a sign-in attempt before anything is checked, against its source and account together
/// (`auth.failures_per_minute`) and its source alone (the much larger
/// `auth.sign_in_source_failures_per_minute`): attempts made at once are bounded like those made
/// one after another, and one student's typos behind a campus NAT lock out that student only.
/// A throttled attempt counts nowhere; a success is forgiven by [`forgive_attempt`].
fn count_attempt(ctl: &Controller, source: IpAddr, username: &str) -> ActionResult<()> {
    let now = Instant::now();
    let throttled = |wait: std::time::Duration| ActionError::Throttled {
        retry_after_s: wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
    };
    let account = (source, account_key(username));
    ctl.sign_in_failures
        .attempt(account.clone(), now)
        .map_err(throttled)?;
    if let Err(wait) = ctl.sign_in_source_failures.attempt(source, now) {
        ctl.sign_in_failures.forgive(&account);
        return Err(throttled(wait));
    }
    Ok(())
}

fn forgive_attempt(ctl: &Controller, source: IpAddr, username: &str) {
    ctl.sign_in_failures
        .forgive(&(source, account_key(username)));
    ctl.sign_in_source_failures.forgive(&source);
}

fn account_key(username: &str) -> String {
    username.chars().take(KEY_CHARS).collect()
}

/// Signs `username` in with `password` from `source`: their portal password first, then the
/// directory when one is configured. A wrong name or password is a 401 that counts against the
/// source and account ([`count_attempt`]), a source or account over its limit a 429 before
/// anything is checked. The database connection is held only to read the hashes and to write
/// the outcome, never while argon2 runs ([`verify`]).
pub async fn password(
    ctl: &Controller,
    username: String,
    password: String,
    source: Option<IpAddr>,
) -> ActionResult<NewSession> {
    if let Some(source) = source {
        count_attempt(ctl, source, &username)?;
    }
    let source_text = source.map(|s| s.to_string()).unwrap_or_default();
    let name = username.clone();
    let (user, hashes) = ctl
        .db(move |conn| {
            let user = User::by_username(conn, &name)?.filter(|u| !u.is_disabled());
            let hashes = match &user {
                Some(user) => Hashes::of(conn, user)?,
                None => Hashes {
                    own: None,
                    first_login: None,
                },
            };
            Ok((user, hashes))
        })
        .await?;
    let matched = verify(hashes, password.clone()).await?;
    let local = user.filter(|_| matched);
    let signed_in = match local {
        Some(user) => Some((user, "password")),
        None => match directory::authenticate(&ctl.config.ldap, &username, &password).await? {
            Some(found) => {
                let name = username.clone();
                ctl.db(move |conn| directory_user(conn, &name, &found))
                    .await?
                    .map(|user| (user, "ldap"))
            }
            None => None,
        },
    };
    let Some((user, via)) = signed_in else {
        let detail = json!({"path": "/signin", "username": account_key(&username),
                            "reason": "wrong username or password"});
        audit_failed(ctl, source_text, &account_key(&username), detail).await?;
        return Err(ActionError::Unauthenticated(
            "wrong username or password".into(),
        ));
    };
    if let Some(source) = source {
        forgive_attempt(ctl, source, &username);
    }
    let lifetime = chrono::Duration::minutes(i64::from(ctl.config.auth.session_minutes.max(1)));
    ctl.db(move |conn| {
        let secret = new_secret();
        let expires_at = Utc::now() + lifetime;
        conn.transaction(|conn| {
            PortalSession::delete_expired(conn)?;
            PortalSession::insert(conn, user.id, &sha256(&secret), &new_secret(), expires_at)?;
            // Signed in: the account is its owner's, no instructor issues it a password again.
            User::note_own_credentials(conn, user.id)?;
            audit::record(
                conn,
                &user.username,
                AuditAction::SignIn,
                AuditObject::User,
                &user.username,
                json!({"source": source_text, "via": via}),
            )
        })?;
        Ok(NewSession { secret, expires_at })
    })
    .await
}

/// The account of someone the directory vouched for: made on their first sign-in with the role
/// their groups give; later the groups can raise the role but never lower one an admin set. A
/// disabled account stays out.
fn directory_user(
    conn: &mut PgConnection,
    username: &str,
    found: &DirectoryUser,
) -> ActionResult<Option<User>> {
    conn.transaction(|conn| {
        let role = role_name(found.role);
        let user = match User::by_username(conn, username)? {
            Some(user) if user.is_disabled() => return Ok(None),
            Some(user) if rank(found.role) > rank(user.role()) => {
                let user = User::set_role(conn, user.id, role)?;
                audit::record(
                    conn,
                    "directory",
                    AuditAction::SetRole,
                    AuditObject::User,
                    username,
                    json!({"role": role, "dn": found.dn}),
                )?;
                user
            }
            Some(user) => user,
            None => {
                let user = User::insert(
                    conn,
                    &NewUser {
                        username,
                        role,
                        full_name: found.full_name.as_deref(),
                        email: found.email.as_deref(),
                    },
                )?;
                audit::record(
                    conn,
                    "directory",
                    AuditAction::CreateUser,
                    AuditObject::User,
                    username,
                    json!({"role": role, "dn": found.dn}),
                )?;
                user
            }
        };
        Ok(Some(user))
    })
}

fn rank(role: Role) -> u8 {
    match role {
        Role::Student => 0,
        Role::Instructor => 1,
        Role::Admin => 2,
    }
}

/// Ends the session whose cookie holds `secret`.
pub async fn sign_out(ctl: &Controller, caller: Caller, secret: String) -> ActionResult<()> {
    ctl.db(move |conn| {
        PortalSession::delete(conn, &sha256(&secret))?;
        Ok(audit::record(
            conn,
            caller.name(),
            AuditAction::SignOut,
            AuditObject::User,
            caller.name(),
            json!({}),
        )?)
    })
    .await
}

/// The caller changes their own password, proving the current one; their other sessions end.
pub async fn change_own(
    ctl: &Controller,
    caller: Caller,
    session_id: i64,
    current: String,
    new: String,
) -> ActionResult<()> {
    check_new_password("new_password", &new)?;
    if !password_matches(ctl, &caller.user, &current).await? {
        return Err(ActionError::invalid(
            "current_password",
            "that is not your current password",
        ));
    }
    let hash = tokio::task::spawn_blocking(move || hash_password(&new))
        .await
        .map_err(|e| ActionError::Internal(e.to_string()))??;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            SignInPassword::set(conn, caller.user.id, &hash)?;
            User::note_own_credentials(conn, caller.user.id)?;
            PortalSession::delete_others(conn, caller.user.id, session_id)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::ChangePassword,
                AuditObject::User,
                caller.name(),
                json!({}),
            )
        })?;
        Ok(())
    })
    .await
}

/// Sets `username`'s portal password (the operator's `cohort-controller password`, and tests).
pub fn set_password(conn: &mut PgConnection, username: &str, password: &str) -> ActionResult<()> {
    check_new_password("password", password)?;
    let user = User::by_username(conn, username)?
        .ok_or_else(|| ActionError::NotFound(format!("user {username}")))?;
    let hash = hash_password(password)?;
    conn.transaction(|conn| {
        SignInPassword::set(conn, user.id, &hash)?;
        audit::record(
            conn,
            "operator",
            AuditAction::SetPassword,
            AuditObject::User,
            username,
            json!({}),
        )
    })?;
    Ok(())
}

/// Audits a failed authentication from `source` (an address) at `what` (the account or path it
/// tried) as `failed_sign_in`, with `detail`: its own row while the minute's cap of rows lasts,
/// else only counted into the minute's summary row ([`crate::accounts::failure_audit`]), so a
/// flood writes a bounded number of rows.
pub async fn audit_failed(
    ctl: &Controller,
    source: String,
    what: &str,
    detail: serde_json::Value,
) -> ActionResult<()> {
    let rows = ctl
        .failure_audit
        .admit(&format!("{source} {what}"), Instant::now());
    if !rows.own && rows.summary.is_none() {
        return Ok(());
    }
    ctl.db(move |conn| {
        if let Some(summary) = rows.summary {
            audit::record(
                conn,
                "anonymous",
                AuditAction::FailedSignIn,
                AuditObject::Source,
                "summary",
                summary,
            )?;
        }
        if rows.own {
            audit::record(
                conn,
                "anonymous",
                AuditAction::FailedSignIn,
                AuditObject::Source,
                &source,
                detail,
            )?;
        }
        Ok(())
    })
    .await
}

/// Writes the failure summary of a window that ended with no failure after it (see
/// [`crate::accounts::failure_audit`]); the controller's beat calls it every few seconds.
pub async fn flush_failure_summary(ctl: &Controller) -> ActionResult<bool> {
    let Some(summary) = ctl.failure_audit.ended(Instant::now()) else {
        return Ok(false);
    };
    ctl.db(move |conn| {
        audit::record(
            conn,
            "anonymous",
            AuditAction::FailedSignIn,
            AuditObject::Source,
            "summary",
            summary.clone(),
        )?;
        Ok(true)
    })
    .await
}

/// The live portal session whose secret hashes to `hash`, and its account.
pub async fn live_session(
    ctl: &Controller,
    hash: Vec<u8>,
) -> ActionResult<Option<(PortalSession, User)>> {
    ctl.db(move |conn| Ok(PortalSession::live(conn, &hash)?))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argon2id_hashes_verify_and_are_salted() {
        let a = hash_password("correct horse battery").expect("hash");
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert!(argon2_matches("correct horse battery", &a));
        assert!(!argon2_matches("correct horse batterz", &a));
        assert_ne!(a, hash_password("correct horse battery").expect("hash"));
        assert!(!argon2_matches("x", "not a phc string"));
    }

    #[test]
    fn new_passwords_have_a_length_range() {
        assert!(check_new_password("p", "short").is_err());
        assert!(check_new_password("p", "long enough pw").is_ok());
        assert!(check_new_password("p", &"x".repeat(MAX_PASSWORD_LEN + 1)).is_err());
    }
}
