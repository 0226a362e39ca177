//! Trust for the LXD-style API: tokens in LXD's format that `lxc remote add` redeems, the client
//! certificates they admitted (each bound to a user, whose roles then apply to it), listing and
//! removal. Users manage their own; admins anyone's.

use base64::Engine;
use chrono::{DateTime, Duration, Utc};
use cohort_proto::api::lxd_trust::{CreateTrustToken, TrustEntry, TrustTokenIssued};
use diesel::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::accounts::auth::{new_secret, sha256, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::lxd_trust::{LxdCertificate, LxdTrustToken};
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::nodes::pki::pem_fingerprint;
use crate::validate;

/// How long a trust token is accepted: long enough to paste it on another machine.
const TOKEN_LIFETIME_HOURS: i64 = 24;

/// LXD's certificate add token (`api.CertificateAddToken`): what `lxc remote add` decodes.
#[derive(Debug, Serialize, Deserialize)]
struct AddToken {
    client_name: String,
    /// SHA-256 of the server certificate: the client pins the server by it.
    fingerprint: String,
    addresses: Vec<String>,
    secret: String,
    expires_at: DateTime<Utc>,
}

/// A new token for `req.user` (default the caller; only admins name another user).
pub async fn create_token(
    ctl: &Controller,
    caller: Caller,
    req: CreateTrustToken,
) -> ActionResult<TrustTokenIssued> {
    validate::label("name", &req.name)?;
    let username = req.user.unwrap_or_else(|| caller.name().to_string());
    if username != caller.name() && !caller.is_admin() {
        return Err(ActionError::Forbidden(
            "only admins trust certificates for other users".into(),
        ));
    }
    let address = ctl.config.lxd_address().ok_or_else(|| {
        ActionError::conflict(
            None,
            "the LXD-style API is not served (set COHORT_LXD_LISTEN)",
        )
    })?;
    let fingerprint = pem_fingerprint(&ctl.pki.server_cert_pem)
        .ok_or_else(|| ActionError::Internal("server certificate unreadable".into()))?;
    let secret = new_secret();
    let expires_at = Utc::now() + Duration::hours(TOKEN_LIFETIME_HOURS);
    let token = AddToken {
        client_name: req.name.clone(),
        fingerprint,
        addresses: vec![address],
        secret: secret.clone(),
        expires_at,
    };
    let encoded = base64::engine::general_purpose::STANDARD
        .encode(serde_json::to_vec(&token).map_err(|e| ActionError::Internal(e.to_string()))?);
    let name = req.name;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let user = User::by_username(conn, &username)?
                .ok_or_else(|| ActionError::NotFound(format!("user {username}")))?;
            LxdTrustToken::insert(conn, &name, user.id, &sha256(&secret), expires_at)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::TrustToken,
                AuditObject::User,
                &username,
                json!({"name": name}),
            )?;
            Ok(TrustTokenIssued {
                name,
                user: username,
                token: encoded,
                expires_at,
            })
        })
    })
    .await
}

/// The secret a `POST /1.0/certificates` password carries: the whole token (what `lxc remote
/// add TOKEN` sends) or its secret alone (what `lxc remote add URL --password` would).
fn secret_of(password: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .decode(password.trim())
        .ok()
        .and_then(|json| serde_json::from_slice::<AddToken>(&json).ok())
        .map_or_else(|| password.trim().to_string(), |t| t.secret)
}

/// Trusts the certificate the client proved it holds (`der`), if `password` names a live token;
/// the token is spent. A certificate trusted already is a conflict.
pub async fn redeem(ctl: &Controller, der: Vec<u8>, password: String) -> ActionResult<()> {
    let hash = sha256(&secret_of(&password));
    let fingerprint = crate::nodes::pki::fingerprint(&der);
    let pem = pem_of(&der);
    let expires_at =
        chrono::Utc::now() + chrono::Duration::days(i64::from(ctl.config.server.lxd_trust_days));
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let token = LxdTrustToken::redeem(conn, &hash)?.ok_or_else(|| {
                ActionError::Forbidden("no such trust token, or it expired or was used".into())
            })?;
            LxdCertificate::insert(
                conn,
                &token.name,
                token.user_id,
                &fingerprint,
                &pem,
                expires_at,
            )
            .map_err(|e| {
                ActionError::from_unique(e, "certificate", "this certificate is trusted already")
            })?;
            let user = User::find(conn, token.user_id)?;
            audit::record(
                conn,
                &user.username,
                AuditAction::TrustCertificate,
                AuditObject::LxdCertificate,
                &token.name,
                json!({"fingerprint": fingerprint}),
            )?;
            Ok(())
        })
    })
    .await
}

fn pem_of(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

/// Trusted certificates and pending tokens: all for admins, the caller's own for others.
pub async fn list(ctl: &Controller, caller: Caller) -> ActionResult<Vec<TrustEntry>> {
    ctl.db(move |conn| {
        let only = (!caller.is_admin()).then_some(caller.user.id);
        let mut entries: Vec<TrustEntry> = LxdCertificate::list(conn, only)?
            .into_iter()
            .map(|(cert, user)| TrustEntry {
                name: cert.name,
                user,
                fingerprint: Some(cert.fingerprint),
                created_at: cert.created_at,
                expires_at: Some(cert.expires_at),
            })
            .collect();
        for token in LxdTrustToken::pending(conn, only)? {
            entries.push(TrustEntry {
                name: token.name,
                user: User::find(conn, token.user_id)?.username,
                fingerprint: None,
                created_at: token.created_at,
                expires_at: Some(token.expires_at),
            });
        }
        Ok(entries)
    })
    .await
}

/// Removes the certificates and pending tokens named `name` (or the certificate whose
/// fingerprint starts with it, 12 hex digits at least) that the caller may manage.
pub async fn remove(ctl: &Controller, caller: Caller, name: String) -> ActionResult<()> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let only = (!caller.is_admin()).then_some(caller.user.id);
            let by_print = name.len() >= 12;
            let mut removed = 0;
            for (cert, _) in LxdCertificate::list(conn, only)? {
                if cert.name == name || (by_print && cert.fingerprint.starts_with(&name)) {
                    removed += usize::from(LxdCertificate::delete(conn, cert.id)?);
                }
            }
            for token in LxdTrustToken::pending(conn, only)? {
                if token.name == name {
                    removed += usize::from(LxdTrustToken::delete(conn, token.id)?);
                }
            }
            if removed == 0 {
                return Err(ActionError::NotFound(format!("trusted certificate {name}")));
            }
            audit::record(
                conn,
                caller.name(),
                AuditAction::UntrustCertificate,
                AuditObject::LxdCertificate,
                &name,
                json!({"removed": removed}),
            )?;
            Ok(())
        })
    })
    .await
}
