//! Roster import: every row checked first (`crate::course::roster`), then, in one transaction,
//! new students are created or found, their keys added and they are enrolled. Students already
//! enrolled but absent from the new roster are reported, never removed.

use std::collections::HashSet;

use cohort_proto::api::courses::RosterReport;
use cohort_proto::api::users::Role;
use diesel::prelude::*;
use serde_json::json;

use super::courses::writable;
use crate::auth::Caller;
use crate::controller::Controller;
use crate::course::{password, roster};
use crate::db::schema::users;
use crate::error::{ActionError, ActionResult};
use crate::models::audit;
use crate::models::enrollment::Enrollment;
use crate::models::ssh_key::SshKey;
use crate::models::user::{NewUser, User};

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
            };
            for (i, entry) in entries.iter().enumerate() {
                let user = match User::by_username(conn, &entry.username)? {
                    Some(user) if user.role() != Role::Student => {
                        return Err(ActionError::invalid(
                            &format!("roster[{}].username", i + 1),
                            format!(
                                "{} is an existing {} account, not a student",
                                entry.username, user.role
                            ),
                        ));
                    }
                    Some(user) => user,
                    None => {
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
                        User::set_roster_course(conn, user.id, course.id)?;
                        user
                    }
                };
                let keys = SshKey::for_user(conn, user.id)?;
                if let Some(key) = &entry.ssh_key {
                    if !keys.iter().any(|k| &k.public_key == key) {
                        SshKey::insert(conn, user.id, key, &key_fingerprint(key)?)?;
                    }
                }
                let needs_password =
                    entry.ssh_key.is_none() && keys.is_empty() && user.password_hash.is_none();
                let initial = needs_password.then(password::generate);
                if let Some(pw) = &initial {
                    diesel::update(users::table.find(user.id))
                        .set(users::password_hash.eq(password::crypt_hash(pw)))
                        .execute(conn)?;
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
                "import_roster",
                "course",
                &code,
                json!({"added": report.added.len(), "rows": entries.len()}),
            )?;
            Ok(report)
        })
    })
    .await
}
