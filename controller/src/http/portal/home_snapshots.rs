//! A course container's home snapshots on its page: the list the daemon keeps, each with a
//! Restore button (the whole home, as an operation) and a path field with its own button (that
//! path copied into `~/restored/<snapshot>/`, the container running; a refused path is shown
//! next to its field on the page again), through the same actions as
//! `/api/v1/instances/{name}/home/...`, so the same people may (the student, the course's
//! staff, admins).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::instances::{HomeSnapshot, RestoreHomeRequest};
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::agent_client::AgentError;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::instances::home;

/// A path restore the action refused: the snapshot, the path asked for, and why.
pub struct PathRefused {
    pub snapshot: String,
    pub path: String,
    pub message: String,
}

/// The section: `snapshots` as read for the page; `None` when they could not be read (the
/// node does not answer), so the rest of the page still shows.
pub fn section(
    s: &SignedIn,
    name: &str,
    snapshots: Option<&[HomeSnapshot]>,
    refused: Option<&PathRefused>,
) -> Markup {
    let lang = s.lang;
    html! {
        h2 { (lang.t(Msg::HomeSnapshots)) }
        @match snapshots {
            None => {}
            Some([]) => { p #no-home-snapshots { (lang.t(Msg::NoHomeSnapshots)) } }
            Some(list) => {
                p #restore-home-warning { (lang.t(Msg::RestoreHomeWarning)) }
                p #restore-path-note { (lang.t(Msg::RestorePathNote)) }
                ul #home-snapshots {
                    @for snap in list {
                        li data-snapshot=(snap.name) {
                            code { (snap.name) }
                            @if let Some(at) = snap.created_at { " " (at.format("%Y-%m-%d %H:%M UTC")) }
                            form.inline method="post" action={ "/containers/" (name) "/home/restore" } {
                                input type="hidden" name="csrf" value=(s.csrf);
                                input type="hidden" name="snapshot" value=(snap.name);
                                button type="submit" id={ "restore-home-" (snap.name) } { (lang.t(Msg::Restore)) }
                            }
                            @let mine = refused.filter(|r| r.snapshot == snap.name);
                            form.inline method="post" action={ "/containers/" (name) "/home/restore-path" } {
                                input type="hidden" name="csrf" value=(s.csrf);
                                input type="hidden" name="snapshot" value=(snap.name);
                                input type="text" name="path" id={ "restore-path-" (snap.name) }
                                    placeholder=(lang.t(Msg::RestorePathHint))
                                    value=(mine.map(|r| r.path.as_str()).unwrap_or(""));
                                button type="submit" id={ "restore-path-button-" (snap.name) } { (lang.t(Msg::RestorePath)) }
                                @if let Some(r) = mine {
                                    p.error id={ "restore-path-error-" (snap.name) } role="alert" { (r.message) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The snapshots of `name`'s home for its page, `None` when they cannot be read.
pub async fn read(ctl: &Controller, s: &SignedIn, name: &str) -> Option<Vec<HomeSnapshot>> {
    home::snapshots(ctl, s.caller.clone(), name.to_string())
        .await
        .ok()
}

#[derive(Deserialize)]
pub struct RestoreForm {
    snapshot: String,
}

/// Restore, then back to the container's page (the operation stops and starts it).
pub async fn restore(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, form): CsrfForm<RestoreForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    let req = RestoreHomeRequest {
        snapshot: form.snapshot,
        path: None,
    };
    home::restore(&ctl, s.caller, name.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish())
}

#[derive(Deserialize)]
pub struct RestorePathForm {
    snapshot: String,
    path: String,
}

/// Restore one path (an operation; the container keeps running), then back to the container's
/// page; a path or snapshot the action refuses shows the page again with the reason next to
/// the field.
pub async fn restore_path(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, form): CsrfForm<RestorePathForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    let req = RestoreHomeRequest {
        snapshot: form.snapshot.clone(),
        path: Some(form.path.clone()),
    };
    let refused = match home::restore(&ctl, s.caller.clone(), name.clone(), req).await {
        Ok(_) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/containers/{name}")))
                .finish())
        }
        Err(e) => e,
    };
    let Some((status, message)) = refused_input(&refused) else {
        return Err(PortalError::Action(s.lang, refused));
    };
    let refused = PathRefused {
        snapshot: form.snapshot,
        path: form.path,
        message,
    };
    super::containers::page(&ctl, s, name, Some(refused), status).await
}

/// The status and reason of a refusal that names the path or the snapshot (shown next to the
/// field); `None` for any other (the error page).
fn refused_input(e: &ActionError) -> Option<(StatusCode, String)> {
    let (status, field, message) = match e {
        ActionError::Invalid { field, message } => (400, field.as_str(), message.clone()),
        ActionError::Missing { field, .. } => (404, field.as_str(), e.to_string()),
        ActionError::Agent {
            source:
                AgentError::Status {
                    status,
                    field: Some(field),
                    message,
                    ..
                },
            ..
        } if (400..500).contains(status) => (*status, field.as_str(), message.clone()),
        _ => return None,
    };
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    matches!(field, "path" | "snapshot").then_some((status, message))
}
