//! The endpoints export: each student's node, host and port as CSV, JSON or an ssh_config
//! snippet, with the generated password of a student who came without a key.

use diesel::prelude::*;

use super::courses::writable;
use crate::auth::Caller;
use crate::controller::Controller;
use crate::course::endpoints::{self, Endpoint};
use crate::db::schema::{instances, nodes};
use crate::error::{ActionError, ActionResult};
use crate::models::enrollment::Enrollment;

/// The export's format, from `?format=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Json,
    SshConfig,
}

impl Format {
    pub fn parse(value: Option<&str>) -> ActionResult<Self> {
        match value.unwrap_or("csv") {
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            "ssh-config" | "ssh_config" => Ok(Format::SshConfig),
            other => Err(ActionError::invalid(
                "format",
                format!("{other:?} is not one of csv, json, ssh-config"),
            )),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Json => "application/json",
            Format::SshConfig => "text/plain; charset=utf-8",
        }
    }
}

/// The rows of the export: students whose container is placed, in username order.
pub async fn list(ctl: &Controller, caller: Caller, code: String) -> ActionResult<Vec<Endpoint>> {
    ctl.db(move |conn| {
        let course = writable(conn, &caller, &code)?;
        let placed: Vec<(i64, String, String, String, Option<i32>)> = instances::table
            .inner_join(nodes::table)
            .filter(instances::course_id.eq(course.id))
            .select((
                instances::owner_id,
                instances::name,
                nodes::name,
                nodes::ssh_host,
                instances::ssh_port,
            ))
            .load(conn)?;
        Ok(Enrollment::students(conn, course.id)?
            .into_iter()
            .filter_map(|s| {
                let (_, instance, node, host, port) = placed.iter().find(|p| p.0 == s.user.id)?;
                Some(Endpoint::new(
                    &s.user.username,
                    instance,
                    node,
                    host,
                    (*port)? as u16,
                    s.initial_password.clone(),
                ))
            })
            .collect())
    })
    .await
}

/// The export rendered in `format`.
pub fn render(rows: &[Endpoint], format: Format) -> String {
    match format {
        Format::Csv => endpoints::to_csv(rows),
        Format::Json => endpoints::to_json(rows),
        Format::SshConfig => endpoints::to_ssh_config(rows),
    }
}
