//! Roster import: every row checked first (`crate::courses::roster`), then, in one transaction,
//! students are created or found and enrolled. Credentials belong to the person: a roster gives
//! a key or a generated password only to an account it creates. An account that already exists
//! (a student of another course, say) is enrolled as it is, with its own keys; a key the roster
//! gave for it is reported as ignored and audited, never added, so no instructor can put their
//! own key on another instructor's student. Students already enrolled but absent from the new
//! roster are reported, never removed.

use std::collections::HashSet;

use cohort_proto::api::courses::{ExistingAccount, RosterReport};
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::course::writable;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::courses::{password, roster};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::ssh_key::SshKey;
use crate::db::models::user::{NewUser, User};
use crate::error::{ActionError, ActionResult};

impl From<roster::RosterError> for ActionError {
    fn from(e: roster::RosterError) -> Self {
        let field = match &e {
            roster::RosterError::Rows(rows) => rows
                .first()
                .map(|r| format!("roster[row {}].{}", r.row, r.field))
                .unwrap_or_else(|| "roster".into()),
            _ => "roster".into(),
        };
        ActionError::Invalid {
            field,
            message: e.to_string(),
        }
    }
}

fn key_fingerprint(key: &str) -> ActionResult<String> {
    let parsed = ssh_key::PublicKey::from_openssh(key)
        .map_err(|e| ActionError::Internal(format!("validated key does not parse: {e}")))?;
    Ok(parsed.fingerprint(ssh_key::HashAlg::Sha256).to_string())
}

pub async fn import(
    ctl: &Controller,
    caller: Caller,
    code: String,
    body: Vec<u8>,
) -> ActionResult<RosterReport> {
    caller.require(Role::Instructor)?;
    let entries = roster::parse(&body)?;
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let before = Enrollment::students(conn, course.id)?;
            let mut report = RosterReport {
                added: Vec::new(),
                already_enrolled: Vec::new(),
                not_in_roster: Vec::new(),
                passwords_generated: Vec::new(),
                existing_accounts: Vec::new(),
            };
            for (i, entry) in entries.iter().enumerate() {
                let (user, initial) = match User::by_username(conn, &entry.username)? {
                    Some(user) if user.role() != Role::Student => {
                        return Err(ActionError::invalid(
                            &format!("roster[{}].username", i + 1),
                            format!(
                                "{} is an existing {} account, not a student",
                                entry.username, user.role
                            ),
                        ));
                    }
                    Some(user) => {
                        let existing = existing_account(conn, &user, entry)?;
                        if existing.roster_key_ignored {
                            audit::record(
                                conn,
                                caller.name(),
                                AuditAction::RosterKeyIgnored,
                                AuditObject::User,
                                &user.username,
                                json!({"course": code}),
                            )?;
                        }
                        report.existing_accounts.push(existing);
                        (user, None)
                    }
                    None => create_student(conn, entry, course.id)?,
                };
                if initial.is_some() {
                    report.passwords_generated.push(user.username.clone());
                }
                if Enrollment::insert(conn, course.id, user.id, initial.as_deref())? {
                    report.added.push(user.username.clone());
                } else {
                    report.already_enrolled.push(user.username.clone());
                }
            }
            let listed: HashSet<&str> = entries.iter().map(|e| e.username.as_str()).collect();
            report.not_in_roster = before
                .iter()
                .map(|s| s.user.username.clone())
                .filter(|u| !listed.contains(u.as_str()))
                .collect();
            audit::record(
                conn,
                caller.name(),
                AuditAction::ImportRoster,
                AuditObject::Course,
                &code,
                json!({"added": report.added.len(), "rows": entries.len()}),
            )?;
            Ok(report)
        })
    })
    .await
}

/// Makes the account a roster row describes, with the row's key, or with a generated password
/// (returned, for the endpoints export) when the row has none.
fn create_student(
    conn: &mut PgConnection,
    entry: &roster::RosterEntry,
    course_id: i64,
) -> ActionResult<(User, Option<String>)> {
    let user = User::insert(
        conn,
        &NewUser {
            username: &entry.username,
            role: "student",
            full_name: (!entry.name.is_empty()).then_some(entry.name.as_str()),
            email: (!entry.email.is_empty()).then_some(entry.email.as_str()),
        },
    )?;
    // Whose roster made it decides who may issue it a new password.
    User::set_roster_course(conn, user.id, course_id)?;
    let initial = match &entry.ssh_key {
        Some(key) => {
            SshKey::insert(conn, user.id, key, &key_fingerprint(key)?)?;
            None
        }
        None => {
            let pw = password::generate();
            User::set_password_hash(conn, user.id, &password::crypt_hash(&pw))?;
            Some(pw)
        }
    };
    Ok((user, initial))
}

/// What a roster row means for an account that exists: nothing about its credentials changes.
fn existing_account(
    conn: &mut PgConnection,
    user: &User,
    entry: &roster::RosterEntry,
) -> ActionResult<ExistingAccount> {
    let keys = SshKey::for_user(conn, user.id)?;
    let roster_key_ignored = entry
        .ssh_key
        .as_ref()
        .is_some_and(|key| !keys.iter().any(|k| &k.public_key == key));
    Ok(ExistingAccount {
        username: user.username.clone(),
        roster_key_ignored,
        without_credentials: keys.is_empty() && user.password_hash.is_none(),
    })
}
