//! A new generated password for a course's student, by the course's instructor or an admin.
//! Credentials belong to the person: one is issued only to an account this course's roster
//! created, that has no SSH key and whose owner never set credentials of their own. It is
//! answered once and kept only as its crypt(3) hash, which reaches the student's running
//! containers at once and the others when they start.

use cohort_proto::api::courses::IssuedPassword;
use diesel::prelude::*;
use serde_json::json;

use super::courses::writable;
use crate::auth::Caller;
use crate::controller::Controller;
use crate::course::password;
use crate::error::{ActionError, ActionResult};
use crate::models::audit;
use crate::models::enrollment::Enrollment;
use crate::models::ssh_key::SshKey;
use crate::models::user::User;

/// Why this course may not issue `user` a password, if it may not.
fn refusal(conn: &mut PgConnection, user: &User, course_id: i64) -> ActionResult<Option<String>> {
    let name = &user.username;
    Ok(if user.roster_course_id != Some(course_id) {
        Some(format!(
            "{name}'s account was not created by this course's roster: only {name} or an admin \
             changes its credentials"
        ))
    } else if user.own_credentials_at.is_some() || !SshKey::for_user(conn, user.id)?.is_empty() {
        Some(format!(
            "{name} has set credentials of their own (an SSH key): only {name} or an admin \
             changes them"
        ))
    } else {
        None
    })
}

pub async fn reissue(
    ctl: &Controller,
    caller: Caller,
    code: String,
    username: String,
) -> ActionResult<IssuedPassword> {
    let issued = ctl
        .db(move |conn| {
            conn.transaction(|conn| {
                let course = writable(conn, &caller, &code)?;
                let student = match User::by_username(conn, &username)? {
                    Some(u) if Enrollment::is_enrolled(conn, course.id, u.id)? => Some(u),
                    _ => None,
                };
                let user = student.ok_or_else(|| {
                    ActionError::NotFound(format!("student {username} of course {code}"))
                })?;
                if let Some(why) = refusal(conn, &user, course.id)? {
                    return Err(ActionError::conflict(Some("username"), why));
                }
                let new = password::generate();
                let user = User::set_password_hash(conn, user.id, &password::crypt_hash(&new))?;
                // An earlier password not yet exported must not show up later.
                Enrollment::forget_passwords(conn, course.id, &[user.id])?;
                audit::record(
                    conn,
                    caller.name(),
                    "reissue_password",
                    "user",
                    &username,
                    json!({"course": code}),
                )?;
                Ok((
                    user.id,
                    IssuedPassword {
                        username,
                        password: new,
                    },
                ))
            })
        })
        .await;
    let (user_id, issued) = issued?;
    for (instance, error) in crate::ssh::push_ssh_to_user(ctl, user_id).await {
        tracing::warn!(%instance, %error, "applying a re-issued password failed");
    }
    Ok(issued)
}
