//! People: authentication, `me`, users and SSH keys (tokens: [`super::tokens`]; disabling and
//! deleting: [`super::disable`]).

use cohort_proto::api::users::{
    AddSshKey, CreateUser, Me, Role, SshKey as WireSshKey, User as WireUser,
};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::instance::Instance;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::{role_name, NewUser, User};
use crate::error::{ActionError, ActionResult};
use crate::jobs::access::enqueue_logins;
use crate::jobs::settle::settle_recorded;
use crate::{validate, views};

/// The user behind a bearer token, for actions that need the caller before any query of theirs.
pub async fn authenticate(ctl: &Controller, bearer: Bearer) -> ActionResult<Caller> {
    ctl.db(move |conn| bearer.caller(conn)).await
}

/// Creates the first admin and returns its token, which lives `lifetime`; refuses when an admin
/// exists (used by `init`).
pub fn bootstrap_admin(
    conn: &mut PgConnection,
    username: &str,
    lifetime: chrono::Duration,
) -> ActionResult<String> {
    validate::username("username", username)?;
    conn.transaction(|conn| {
        if User::count_admins(conn)? > 0 {
            return Err(ActionError::conflict(None, "an admin already exists"));
        }
        let user = User::insert(
            conn,
            &NewUser {
                username,
                role: role_name(Role::Admin),
                full_name: None,
                email: None,
            },
        )
        .map_err(|e| ActionError::from_unique(e, "username", "that username is taken"))?;
        let (token, _) = super::tokens::mint(conn, &user, Some("init"), lifetime)?;
        audit::record(
            conn,
            "init",
            AuditAction::Create,
            AuditObject::User,
            username,
            json!({"role": "admin"}),
        )?;
        Ok(token)
    })
}

pub async fn me(ctl: &Controller, bearer: Bearer) -> ActionResult<Me> {
    ctl.db_as(bearer, |conn, caller| {
        let rows = Instance::list(conn, Some(caller.user.id))?;
        Ok(Me {
            user: views::user(&caller.user),
            instances: views::instances(conn, rows.into_iter().map(Into::into).collect())?,
            ssh_keys: SshKey::for_user(conn, caller.user.id)?
                .iter()
                .map(views::ssh_key)
                .collect(),
        })
    })
    .await
}

pub async fn list(ctl: &Controller, bearer: Bearer) -> ActionResult<Vec<WireUser>> {
    ctl.db_as(bearer, |conn, caller| {
        caller.require(Role::Instructor)?;
        // An instructor sees their own students (and themselves), not every account's email.
        let users = if caller.is_admin() {
            User::list(conn)?
        } else {
            User::taught_by(conn, caller.user.id)?
        };
        Ok(users.iter().map(views::user).collect())
    })
    .await
}

pub async fn create(ctl: &Controller, caller: Caller, req: CreateUser) -> ActionResult<WireUser> {
    caller.require(Role::Admin)?;
    // The roster's rules, so no account exists that a roster would have refused.
    validate::username("username", &req.username)?;
    if let Some(name) = &req.full_name {
        cohort_proto::validate::display_text(name, 200)
            .map_err(|e| ActionError::invalid("full_name", e.0))?;
    }
    if let Some(email) = &req.email {
        crate::courses::roster::email(email).map_err(|e| ActionError::invalid("email", e))?;
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let user = User::insert(
                conn,
                &NewUser {
                    username: &req.username,
                    role: role_name(req.role),
                    full_name: req.full_name.as_deref(),
                    email: req.email.as_deref(),
                },
            )
            .map_err(|e| ActionError::from_unique(e, "username", "that username is taken"))?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::Create,
                AuditObject::User,
                &user.username,
                json!({"role": user.role}),
            )?;
            Ok(views::user(&user))
        })
    })
    .await
}

/// Checks one OpenSSH public key line by the rules the agent applies too; returns it in
/// canonical form with its `SHA256:` fingerprint.
pub fn parse_public_key(field: &str, line: &str) -> ActionResult<(String, String)> {
    let canonical = cohort_proto::validate::ssh_public_key(line)
        .map_err(|e| ActionError::invalid(field, e.0))?;
    let key = ssh_key::PublicKey::from_openssh(&canonical)
        .map_err(|e| ActionError::invalid(field, e.to_string()))?;
    let fingerprint = key.fingerprint(ssh_key::HashAlg::Sha256).to_string();
    Ok((canonical, fingerprint))
}

/// Stores a key and applies it to every running container of the user by an `apply_logins`
/// operation the answer waits a while for (stopped ones get it when they next start).
pub async fn add_ssh_key(
    ctl: &Controller,
    caller: Caller,
    req: AddSshKey,
) -> ActionResult<WireSshKey> {
    let (public_key, fingerprint) = parse_public_key("public_key", &req.public_key)?;
    let user_id = caller.user.id;
    let key = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let key = SshKey::insert(conn, caller.user.id, &public_key, &fingerprint).map_err(
                    |e| ActionError::from_unique(e, "public_key", "this key is already there"),
                )?;
                // From now on the account's credentials are the person's own: no instructor
                // issues it a password again.
                User::note_own_credentials(conn, caller.user.id)?;
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::AddSshKey,
                    AuditObject::User,
                    caller.name(),
                    json!({"fingerprint": fingerprint}),
                )?;
                let op = enqueue_logins(conn, user_id, caller.name(), Some(user_id))?;
                Ok((views::ssh_key(&key), op.map(|op| op.id)))
            })
        })
        .await?;
    let (key, op) = key;
    settle_recorded(ctl, op).await?;
    Ok(key)
}

/// Removes a key; like adding one, the change reaches every running container of the user.
pub async fn delete_ssh_key(ctl: &Controller, caller: Caller, id: i64) -> ActionResult<()> {
    let user_id = caller.user.id;
    let op = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                if SshKey::delete(conn, caller.user.id, id)? == 0 {
                    return Err(ActionError::NotFound(format!("ssh key {id}")));
                }
                audit::record(
                    conn,
                    caller.name(),
                    AuditAction::DeleteSshKey,
                    AuditObject::User,
                    caller.name(),
                    json!({"id": id}),
                )?;
                let op = enqueue_logins(conn, user_id, caller.name(), Some(user_id))?;
                Ok(op.map(|op| op.id))
            })
        })
        .await?;
    settle_recorded(ctl, op).await
}
