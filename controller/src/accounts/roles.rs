//! An account's role, changed by an admin (`PUT /api/v1/users/{username}/role` and the admin
//! page's users table): audited with the role before and after.

use cohort_proto::api::users::{Role, SetRole, User as WireUser};
use diesel::prelude::*;
use serde_json::json;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::user::{role_name, User};
use crate::error::{ActionError, ActionResult};
use crate::views;

/// Gives `username` the role `req.role`. An admin cannot change their own role (so the admin
/// who asks always remains, and no one locks themself out); an instructor who still teaches a
/// course keeps at least the instructor role until the course is given to another. Setting the
/// role an account already has changes nothing and records nothing.
pub async fn set_role(
    ctl: &Controller,
    caller: Caller,
    username: String,
    req: SetRole,
) -> ActionResult<WireUser> {
    caller.require(Role::Admin)?;
    if caller.name() == username {
        return Err(ActionError::conflict(
            Some("role"),
            "an admin cannot change their own role",
        ));
    }
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let user = User::by_username(conn, &username)?
                .ok_or_else(|| ActionError::NotFound(format!("user {username}")))?;
            let before = user.role();
            if before == req.role {
                return Ok(views::user(&user));
            }
            if req.role < Role::Instructor {
                super::disable::refuse_while_teaching(conn, &user, "role")?;
            }
            let user = User::set_role(conn, user.id, role_name(req.role))?;
            audit::record(
                conn,
                caller.name(),
                AuditAction::SetRole,
                AuditObject::User,
                &username,
                json!({"from": role_name(before), "role": role_name(req.role)}),
            )?;
            Ok(views::user(&user))
        })
    })
    .await
}
