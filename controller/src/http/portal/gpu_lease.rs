//! GPUs on demand on a student's container page (issue 43): in an on-demand course, the lease
//! or the place in the queue, **Attach a GPU** (with the hours) and **Give the GPU back** /
//! **Leave the queue**; each form calls the same action as the API
//! (`crate::reclaim::leases`).

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::GpuHours;
use cohort_proto::api::gpu_leases::{GpuLease, GpuLeaseRequest, LeaseState};
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::reclaim::leases;

/// `None` outside an on-demand course (or when it cannot be read: the page shows the rest).
pub async fn read(ctl: &Controller, s: &SignedIn, name: &str) -> Option<Option<GpuLease>> {
    match leases::page(ctl, s.caller.clone(), name.to_string()).await {
        Ok(state) => state,
        Err(e) => {
            tracing::info!(instance = %name, "the container page's GPU lease: {e}");
            None
        }
    }
}

pub fn section(s: &SignedIn, name: &str, state: &Option<Option<GpuLease>>) -> Markup {
    let lang = s.lang;
    let Some(lease) = state else {
        return html! {};
    };
    let open = lease
        .as_ref()
        .filter(|l| matches!(l.state, LeaseState::Active | LeaseState::Queued));
    html! {
        section #gpu-on-demand {
            h2 { (lang.t(Msg::GpuOnDemand)) }
            @match open {
                Some(l) if l.state == LeaseState::Active => {
                    p #gpu-lease {
                        (lang.t(Msg::GpuLeasedUntil)) ": "
                        @if let Some(at) = &l.ends_at {
                            time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) }
                        }
                    }
                    (release_form(s, name, Msg::GiveGpuBack, "give-gpu-back"))
                }
                Some(l) => {
                    p #gpu-queued {
                        (lang.t(Msg::PlaceInQueue)) ": " span #gpu-place { (l.place.unwrap_or(0)) }
                        @if let Some(why) = &l.why { " (" (why) ")" }
                    }
                    (release_form(s, name, Msg::LeaveGpuQueue, "leave-gpu-queue"))
                }
                None => {
                    @if let Some(reason) = lease.as_ref().and_then(|l| l.end_reason.as_ref()) {
                        p #gpu-lease-ended { (reason) }
                    }
                    form method="post" action={ "/containers/" (name) "/gpu-lease" } {
                        input type="hidden" name="csrf" value=(s.csrf);
                        label { (lang.t(Msg::LeaseHours)) " "
                            input #lease-hours type="number" name="hours" min="0.1" step="0.1" value="2";
                        }
                        button type="submit" #attach-gpu { (lang.t(Msg::AttachGpu)) }
                    }
                }
            }
        }
    }
}

fn release_form(s: &SignedIn, name: &str, label: Msg, id: &str) -> Markup {
    html! {
        form method="post" action={ "/containers/" (name) "/gpu-lease/release" } {
            input type="hidden" name="csrf" value=(s.csrf);
            button type="submit" id=(id) { (s.lang.t(label)) }
        }
    }
}

#[derive(Deserialize)]
pub struct AttachForm {
    hours: Option<f64>,
}

/// Asks for a GPU, then back to the container's page (which shows the lease or the place).
pub async fn attach(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, form): CsrfForm<AttachForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    let req = GpuLeaseRequest {
        hours: form.hours.map(GpuHours),
    };
    leases::request(&ctl, s.caller, name.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(back(&name))
}

#[derive(Deserialize)]
pub struct ReleaseForm {}

/// Gives the GPU back or leaves the queue, then back to the container's page.
pub async fn release(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, _): CsrfForm<ReleaseForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    leases::release(&ctl, s.caller, name.clone())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(back(&name))
}

fn back(name: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish()
}
