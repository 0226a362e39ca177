//! The endpoints export: each student's node, host, port and host key as CSV, JSON, an
//! ssh_config snippet or known_hosts lines, with the generated password of a student who came
//! without a key (CSV and JSON, the first time only).

use diesel::prelude::*;
use serde_json::json;

use super::course::writable;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::courses::endpoints::{self, Endpoint};
use crate::db::enums::{AuditAction, AuditObject};
use crate::db::models::audit;
use crate::db::models::enrollment::Enrollment;
use crate::db::models::instance::Instance;
use crate::error::{ActionError, ActionResult};

/// The export's format, from `?format=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
    SshConfig,
    KnownHosts,
}

impl Format {
    pub fn parse(value: Option<&str>) -> ActionResult<Self> {
        match value.unwrap_or("csv") {
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "ssh-config" | "ssh_config" => Ok(Format::SshConfig),
            "known-hosts" | "known_hosts" => Ok(Format::KnownHosts),
            other => Err(ActionError::invalid(
                "format",
                format!("{other:?} is not one of csv, json, ssh-config, known-hosts"),
            )),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
            Format::SshConfig | Format::KnownHosts => "text/plain; charset=utf-8",
        }
    }
}

impl Format {
    /// Whether the export in this format carries the generated passwords.
    pub fn shows_passwords(self) -> bool {
        matches!(self, Format::Csv | Format::Json)
    }
}

/// The rows of the export in `format`: students whose container is placed, in username order.
/// A generated password is in the first export that shows it and in none after: the clear text
/// is forgotten then (the account keeps its hash), and the export that showed it is audited.
pub async fn list(
    ctl: &Controller,
    caller: Caller,
    code: String,
    format: Format,
) -> ActionResult<Vec<Endpoint>> {
    ctl.db(move |conn| conn.transaction(|conn| rows(conn, &caller, &code, format)))
        .await
}

fn rows(
    conn: &mut PgConnection,
    caller: &Caller,
    code: &str,
    format: Format,
) -> ActionResult<Vec<Endpoint>> {
    let course = writable(conn, caller, code)?;
    let placed = Instance::endpoints_of_course(conn, course.id)?;
    let mut shown = Vec::new();
    let rows: Vec<Endpoint> = Enrollment::students(conn, course.id)?
        .into_iter()
        .filter_map(|s| {
            let (_, instance, node, host, port, host_key) =
                placed.iter().find(|p| p.0 == s.user.id)?;
            let port = (*port)? as u16;
            let password = s.initial_password.filter(|_| format.shows_passwords());
            if password.is_some() {
                shown.push((s.user.id, s.user.username.clone()));
            }
            Some(Endpoint::new(
                &s.user.username,
                instance,
                node,
                host,
                port,
                password,
                host_key.as_deref(),
            ))
        })
        .collect();
    if !shown.is_empty() {
        let ids: Vec<i64> = shown.iter().map(|(id, _)| *id).collect();
        Enrollment::forget_passwords(conn, course.id, &ids)?;
        let names: Vec<&str> = shown.iter().map(|(_, name)| name.as_str()).collect();
        audit::record(
            conn,
            caller.name(),
            AuditAction::ShowPasswords,
            AuditObject::Course,
            code,
            json!({"students": names}),
        )?;
    }
    Ok(rows)
}

/// The generated passwords of the course's students who have one waiting, for the page that
/// shows them right after their roster was imported: shown once, as the first export would show
/// them, then forgotten (the accounts keep their hashes) and the showing audited.
pub async fn reveal_passwords(
    ctl: &Controller,
    caller: Caller,
    code: String,
) -> ActionResult<Vec<(String, String)>> {
    ctl.db(move |conn| {
        conn.transaction(|conn| {
            let course = writable(conn, &caller, &code)?;
            let waiting: Vec<(i64, String, String)> = Enrollment::students(conn, course.id)?
                .into_iter()
                .filter_map(|s| Some((s.user.id, s.user.username, s.initial_password?)))
                .collect();
            if waiting.is_empty() {
                return Ok(Vec::new());
            }
            let ids: Vec<i64> = waiting.iter().map(|(id, _, _)| *id).collect();
            Enrollment::forget_passwords(conn, course.id, &ids)?;
            let names: Vec<&str> = waiting.iter().map(|(_, name, _)| name.as_str()).collect();
            audit::record(
                conn,
                caller.name(),
                AuditAction::ShowPasswords,
                AuditObject::Course,
                &code,
                json!({"students": names}),
            )?;
            Ok(waiting
                .into_iter()
                .map(|(_, name, password)| (name, password))
                .collect())
        })
    })
    .await
}

/// The export rendered in `format`.
pub fn render(rows: &[Endpoint], format: Format) -> String {
    match format {
        Format::Csv => endpoints::to_csv(rows),
        Format::Json => endpoints::to_json(rows),
        Format::SshConfig => endpoints::to_ssh_config(rows),
        Format::KnownHosts => endpoints::to_known_hosts(rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_and_an_unknown_one_names_the_field_and_the_choices() {
        assert_eq!(Format::parse(None).unwrap(), Format::Csv);
        assert_eq!(
            Format::parse(Some("known-hosts")).unwrap(),
            Format::KnownHosts
        );
        assert_eq!(
            Format::parse(Some("known_hosts")).unwrap(),
            Format::KnownHosts
        );
        match Format::parse(Some("xml")) {
            Err(ActionError::Invalid { field, message }) => {
                assert_eq!(field, "format");
                assert!(message.contains("known-hosts"), "{message}");
            }
            other => panic!("expected a 400 on format, got {other:?}"),
        }
    }
}
