//! A new generated password for a course's student, by the course's instructor or an admin.
//! A credential that reaches all of a person's containers is the person's: one is issued only to
//! an account this course's roster created, that is in no other course (whose containers the
//! password would open too), has no SSH key, and whose owner never signed in nor set credentials
//! of their own. It is answered once and kept only as its crypt(3) hash, which reaches the
//! student's running containers by an `apply_logins` operation (the answer waits a while for
//! it) and the others when they start.

use cohort_proto::api::courses::IssuedPassword;
use diesel::prelude::*;
use serde_json::json;

use super::course::writable;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::courses::password;
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::sign_in_password::SignInPassword;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::User;
use crate::error::{ActionError, ActionResult};
use crate::jobs::access::enqueue_logins;
use crate::jobs::settle::settle_recorded;

/// Why this course may not issue `user` a password, if it may not.
fn refusal(conn: &mut PgConnection, user: &User, course_id: i64) -> ActionResult<Option<String>> {
    let name = &user.username;
    Ok(if user.roster_course_id != Some(course_id) {
        Some(format!(
            "{name}'s account was not created by this course's roster: only {name} or an admin \
             changes its credentials"
        ))
    } else if Enrollment::in_other_course(conn, course_id, user.id)? {
        Some(format!(
            "{name} is also a student of another course, whose containers a password would \
             open too: only {name} or an admin changes its credentials"
        ))
    } else if user.own_credentials_at.is_some()
        || !SshKey::for_user(conn, user.id)?.is_empty()
        || SignInPassword::hash_of(conn, user.id)?.is_some()
    {
        Some(format!(
            "{name} has signed in or set credentials of their own (an SSH key, a password): \
             only {name} or an admin changes them"
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
                    AuditAction::ReissuePassword,
                    AuditObject::User,
                    &username,
                    json!({"course": code}),
                )?;
                let op = enqueue_logins(conn, user.id, &username, Some(caller.user.id))?;
                Ok((
                    op.map(|op| op.id),
                    IssuedPassword {
                        username,
                        password: new,
                    },
                ))
            })
        })
        .await;
    let (op, issued) = issued?;
    settle_recorded(ctl, op).await?;
    Ok(issued)
}
