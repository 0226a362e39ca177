//! A course container's home snapshots on its page: the list the daemon keeps, each with a
//! Restore button (the whole home, as an operation), through the same actions as
//! `/api/v1/instances/{name}/home/...`, so the same people may (the student, the course's
//! staff, admins).

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use cohort_proto::api::instances::{HomeSnapshot, RestoreHomeRequest};
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::instances::home;

/// The section: `snapshots` as read for the page; `None` when they could not be read (the
/// node does not answer), so the rest of the page still shows.
pub fn section(s: &SignedIn, name: &str, snapshots: Option<&[HomeSnapshot]>) -> Markup {
    let lang = s.lang;
    html! {
        h2 { (lang.t(Msg::HomeSnapshots)) }
        @match snapshots {
            None => {}
            Some([]) => { p #no-home-snapshots { (lang.t(Msg::NoHomeSnapshots)) } }
            Some(list) => {
                p #restore-home-warning { (lang.t(Msg::RestoreHomeWarning)) }
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
    };
    home::restore(&ctl, s.caller, name.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish())
}
