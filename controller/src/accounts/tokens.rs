//! API tokens: issued with an expiry, listed (never their secret) and revoked, by their user or
//! an admin.

use chrono::{Duration, Utc};
use cohort_proto::api::users::{ApiToken as WireApiToken, ApiTokenIssued, CreateApiToken};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{new_api_token, sha256, Caller};
use crate::app::config::AuthConfig;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::api_token::ApiToken;
use crate::db::models::audit;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::validate;

/// Only admins act on other people's tokens.
fn own_or_admin(caller: &Caller, username: &str, what: &str) -> ActionResult<()> {
    if caller.is_admin() || caller.name() == username {
        Ok(())
    } else {
        Err(ActionError::Forbidden(format!(
            "only admins {what} tokens of others"
        )))
    }
}

fn user(conn: &mut PgConnection, username: &str) -> ActionResult<User> {
    User::by_username(conn, username)?
        .ok_or_else(|| ActionError::NotFound(format!("user {username}")))
}

/// The lifetime a request asks for, within the configured bounds.
pub fn lifetime(auth: &AuthConfig, days: Option<u32>) -> ActionResult<Duration> {
    let days = days.unwrap_or(auth.token_days);
    if days == 0 || days > auth.token_max_days {
        return Err(ActionError::invalid(
            "expires_in_days",
            format!("must be 1 to {} days", auth.token_max_days),
        ));
    }
    Ok(Duration::days(i64::from(days)))
}

/// Makes a token for `user` that lives `lifetime`, in the caller's transaction; returns the
/// secret (shown once) and its row.
pub fn mint(
    conn: &mut PgConnection,
    user: &User,
    name: Option<&str>,
    lifetime: Duration,
) -> QueryResult<(String, ApiToken)> {
    let token = new_api_token();
    let row = ApiToken::insert(conn, user.id, name, &sha256(&token), Utc::now() + lifetime)?;
    Ok((token, row))
}

/// Most API tokens one account holds (expired ones count until revoked).
pub const MAX_TOKENS_PER_USER: usize = 100;

/// A new token for `username`: admins for anyone, others for themselves only.
pub async fn issue(
    ctl: &Controller,
    caller: Caller,
    username: String,
    req: CreateApiToken,
) -> ActionResult<ApiTokenIssued> {
    own_or_admin(&caller, &username, "issue")?;
    if let Some(name) = &req.name {
        validate::label("name", name)?;
    }
    let lifetime = lifetime(&ctl.config.auth, req.expires_in_days)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let user = user(conn, &username)?;
            // Serialises the count with other issues for the same user.
            User::lock(conn, user.id)?;
            let held = ApiToken::for_user(conn, user.id)?.len();
            if held >= MAX_TOKENS_PER_USER {
                return Err(ActionError::conflict(
                    Some("name"),
                    format!(
                        "{username} holds {held} tokens, the most one account may: revoke one \
                         first"
                    ),
                ));
            }
            let (token, row) = mint(conn, &user, req.name.as_deref(), lifetime)?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::IssueToken,
                AuditObject::User,
                &username,
                json!({"name": req.name, "id": row.id, "expires_at": row.expires_at}),
            )?;
            Ok(ApiTokenIssued {
                username,
                name: req.name,
                token,
                id: row.id,
                expires_at: Some(row.expires_at),
            })
        })
    })
    .await
}

/// The user's tokens, expired ones included (until revoked).
pub async fn list(
    ctl: &Controller,
    caller: Caller,
    username: String,
) -> ActionResult<Vec<WireApiToken>> {
    own_or_admin(&caller, &username, "list")?;
    ctl.db(move |conn| {
        let user = user(conn, &username)?;
        let now = Utc::now();
        Ok(ApiToken::for_user(conn, user.id)?
            .into_iter()
            .map(|t| WireApiToken {
                id: t.id,
                name: t.name,
                created_at: t.created_at,
                expires_at: t.expires_at,
                expired: t.expires_at <= now,
            })
            .collect())
    })
    .await
}

/// Revokes one token: it is deleted, so it is refused from the next request on.
pub async fn revoke(
    ctl: &Controller,
    caller: Caller,
    username: String,
    id: i64,
) -> ActionResult<()> {
    own_or_admin(&caller, &username, "revoke")?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let user = user(conn, &username)?;
            if !ApiToken::revoke(conn, user.id, id)? {
                return Err(ActionError::NotFound(format!("token {id} of {username}")));
            }
            audit::record(
                conn,
                caller.name(),
                AuditAction::RevokeToken,
                AuditObject::User,
                &username,
                json!({"id": id}),
            )?;
            Ok(())
        })
    })
    .await
}
