//! The student's pages: their containers with status and node, one container's SSH command
//! (with a copy button) and `known_hosts` line, and start, stop and restart as plain forms. Every
//! read and change goes through the same actions as `/api/v1/instances`. A queued container shows
//! why it waits; the create form is in [`create_container`]; a course container's home
//! snapshots are in [`super::home_snapshots`].

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::instances::{
    Instance as WireInstance, InstanceStateChange, ObservedState, StateAction,
};
use maud::{html, Markup};
use serde::Deserialize;

use super::create_container::{self, Refusal};
use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::layout;
use super::session::{CsrfForm, SignedIn};
use super::words;
use crate::accounts::users;
use crate::app::state::Controller;
use crate::courses::endpoints::Endpoint;
use crate::images::catalog;
use crate::instances::manage;
use crate::nodes::gpus;
use crate::placement::queue_reason::QUEUED;

fn state_name(lang: Lang, i: &WireInstance) -> &'static str {
    words::observed(lang, i.observed_state)
}

/// The SSH endpoint of an instance that has one, worded as the course endpoints export does.
fn endpoint(i: &WireInstance) -> Option<Endpoint> {
    Some(Endpoint::new(
        &i.owner,
        &i.name,
        i.node.as_deref().unwrap_or(""),
        i.ssh_host.as_deref()?,
        i.ssh_port?,
        None,
        i.ssh_host_key.as_deref(),
    ))
}

/// The caller's own containers (`GET /api/v1/me`'s), each queued one with why it waits, and the
/// create form.
pub async fn home(ctl: web::Data<Controller>, s: SignedIn) -> Result<HttpResponse, PortalError> {
    render_home(&ctl, &s, StatusCode::OK, None).await
}

/// Why a queued container waits: the reason placement keeps on it, without its prefix.
fn queue_reason(i: &WireInstance) -> Option<&str> {
    (i.observed_state == ObservedState::Queued)
        .then_some(i.error.as_deref()?)
        .map(|e| e.strip_prefix(QUEUED).unwrap_or(e).trim())
}

/// The containers page; `refusal` is a refused create form, shown at its field.
pub async fn render_home(
    ctl: &Controller,
    s: &SignedIn,
    status: StatusCode,
    refusal: Option<&Refusal>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let me = users::me(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let catalog = catalog::list(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let gpu_models = gpus::models(ctl)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let mine = &me.instances;
    let archives = crate::courses::archive::mine(ctl, s.caller.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let mut warned = Vec::new();
    for i in mine {
        let w = crate::reclaim::warning::pending(ctl, s.bearer.clone(), i.name.clone())
            .await
            .map_err(|e| PortalError::Action(lang, e))?;
        if !w.is_empty() {
            warned.push((i.name.clone(), w));
        }
    }
    Ok(layout::page(
        status,
        lang,
        Some(s),
        lang.t(Msg::MyContainers),
        html! {
            @for (name, w) in &warned {
                div.reclaim-warnings data-name=(name) {
                    h2 { a href={ "/containers/" (name) } { (name) } }
                    (reclaim_banner(s, name, w))
                }
            }
            @if mine.is_empty() {
                p #no-containers { (lang.t(Msg::NoContainers)) }
            } @else {
                table #containers {
                    thead { tr {
                        th scope="col" { (lang.t(Msg::Name)) }
                        th scope="col" { (lang.t(Msg::Status)) }
                        th scope="col" { (lang.t(Msg::Node)) }
                        th scope="col" { (lang.t(Msg::SshCommand)) }
                    } }
                    tbody {
                        @for i in mine {
                            tr data-name=(i.name) {
                                td { a href={ "/containers/" (i.name) } { (i.name) } }
                                td.status {
                                    (state_name(lang, i))
                                    @if let Some(why) = queue_reason(i) {
                                        br; span.queue-reason { (lang.t(Msg::Reason)) ": " (words::queue_reason(lang, why)) }
                                    }
                                }
                                td { (i.node.as_deref().unwrap_or("—")) }
                                td { @if let Some(e) = endpoint(i) { code { (e.ssh_command) } } }
                            }
                        }
                    }
                }
            }
            (create_container::section(s, &catalog, &gpu_models, mine.len(), refusal))
            (super::archives::section(lang, &archives))
        },
    ))
}

fn actions(lang: Lang, s: &SignedIn, name: &str) -> Markup {
    html! {
        div.actions {
            @for (action, label) in [("start", Msg::Start), ("stop", Msg::Stop), ("restart", Msg::Restart)] {
                form method="post" action={ "/containers/" (name) "/state" } {
                    input type="hidden" name="csrf" value=(s.csrf);
                    input type="hidden" name="action" value=(action);
                    button type="submit" id={ "action-" (action) } { (lang.t(label)) }
                }
            }
        }
    }
}

/// One container; a container the caller may not see is the 403 (or 404) page the action's
/// refusal maps to.
pub async fn show(
    ctl: web::Data<Controller>,
    s: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, PortalError> {
    page(&ctl, s, name.into_inner(), None, StatusCode::OK).await
}

/// The container's page with `status`; `refused`, a path restore to show refused next to its
/// field.
pub(super) async fn page(
    ctl: &Controller,
    s: SignedIn,
    name: String,
    refused: Option<super::home_snapshots::PathRefused>,
    status: StatusCode,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let i = manage::get(ctl, s.bearer.clone(), name)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let e = endpoint(&i);
    let alias = i.image.clone();
    let jupyter = catalog::has_jupyter(ctl, alias)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let running = i.observed_state == ObservedState::Running;
    let budgets = crate::courses::budget::mine(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let budget = budgets
        .iter()
        .find(|b| i.course.as_deref() == Some(b.course.as_str()));
    let gpu_lease = super::gpu_lease::read(ctl, &s, &i.name).await;
    let warnings = crate::reclaim::warning::pending(ctl, s.bearer.clone(), i.name.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let home_snapshots = match i.course {
        Some(_) => Some(super::home_snapshots::read(ctl, &s, &i.name).await),
        None => None,
    };
    Ok(layout::page(
        status,
        lang,
        Some(&s),
        &i.name,
        html! {
            @if let Some(b) = budget {
                (budget_banner(lang, b))
            }
            (reclaim_banner(&s, &i.name, &warnings))
            dl.facts {
                dt { (lang.t(Msg::Status)) } dd #status { (state_name(lang, &i)) }
                dt { (lang.t(Msg::Node)) } dd #node { (i.node.as_deref().unwrap_or("—")) }
                @if let Some(reason) = &i.stop_reason {
                    dt { (lang.t(Msg::StoppedBecause)) } dd #stop-reason {
                        (reason)
                        @if let Some(at) = &i.stopped_at {
                            " (" time #stop-at datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) } ")"
                        }
                    }
                }
                @if let Some(reason) = &i.gpu_detach_reason {
                    dt { (lang.t(Msg::GpusDetachedBecause)) } dd #gpu-detach-reason {
                        (reason)
                        @if let Some(at) = &i.gpus_detached_at {
                            " (" time #gpu-detach-at datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) } ")"
                        }
                        // A budget used up is lifted by a grant, not by asking again.
                        @if running && !reason.starts_with(crate::reclaim::budget::USED_UP) {
                            form #attach-gpu-again method="post" action={ "/containers/" (i.name) "/gpus/attach-again" } {
                                input type="hidden" name="csrf" value=(s.csrf);
                                button type="submit" { (lang.t(Msg::AttachGpuAgain)) }
                            }
                        }
                    }
                }
            }
            @if jupyter && running {
                p { a #open-jupyter.button href={ "/jupyter/" (i.name) "/lab" } { (lang.t(Msg::OpenJupyter)) } }
            } @else if jupyter {
                div #jupyter-stopped {
                    p { (lang.t(Msg::JupyterNeedsRunning)) }
                    @if let Some(at) = &i.stopped_at {
                        p { (lang.t(Msg::StoppedSince)) ": " time #stopped-since datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) } }
                    }
                }
            }
            @if let Some(e) = &e {
                h2 { (lang.t(Msg::SshCommand)) }
                div.copyable {
                    code #ssh-command { (e.ssh_command) }
                    button type="button" data-copy="ssh-command" data-copied=(lang.t(Msg::Copied)) {
                        (lang.t(Msg::Copy))
                    }
                }
                @if let Some(line) = &e.known_hosts {
                    h2 { (lang.t(Msg::HostKey)) }
                    div.copyable {
                        code #known-hosts { (line) }
                        button type="button" data-copy="known-hosts" data-copied=(lang.t(Msg::Copied)) {
                            (lang.t(Msg::Copy))
                        }
                    }
                }
            }
            (actions(lang, &s, &i.name))
            (super::gpu_lease::section(&s, &i.name, &gpu_lease))
            @if let Some(snapshots) = &home_snapshots {
                (super::home_snapshots::section(&s, &i.name, snapshots.as_deref(), refused.as_ref()))
            }
        },
    ))
}

/// The student's GPU budget at 80 % or more of its limit: a banner saying so, with the hours.
fn budget_banner(lang: Lang, b: &cohort_proto::api::courses::StudentBudget) -> Markup {
    use crate::reclaim::budget::{hours, WARN_SHARE};
    let limit = b.budget_hours.0 + b.granted_hours.0;
    let used = b.used_hours.0;
    let (id, msg) = if used >= limit {
        ("budget-used-up", Msg::GpuBudgetUsedUp)
    } else if used >= WARN_SHARE * limit {
        ("budget-warning", Msg::GpuBudgetWarning)
    } else {
        return html! {};
    };
    html! {
        p.banner id=(id) role="status" {
            (lang.t(msg)) ": " span.used { (hours(used)) } " / " span.limit { (hours(limit)) }
        }
    }
}

#[derive(Deserialize)]
pub struct StateForm {
    action: StateAction,
}

/// Start, stop or restart, then back to the container's page.
pub async fn change_state(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, form): CsrfForm<StateForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    let req = InstanceStateChange {
        action: form.action,
        force: false,
        timeout_s: None,
    };
    manage::change_state(&ctl, s.caller, name.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish())
}

/// A reclaim announced and not yet done: what and when, with **Keep working** while the
/// warning has not been kept (once per warning); a budget's cannot be kept, and says so.
fn reclaim_banner(
    s: &SignedIn,
    name: &str,
    warnings: &[cohort_proto::api::instances::ReclaimWarning],
) -> Markup {
    let lang = s.lang;
    html! {
        @for w in warnings {
            div.banner.reclaim-warning data-reason=(w.reason) role="alert" {
                p {
                    (lang.t(crate::http::portal::i18n::reclaim_words(&w.reason, &w.action)))
                    " " time.due datetime=(w.due_at.to_rfc3339()) { (w.due_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                }
                @if w.reason == "budget" {
                    p.not-kept { (lang.t(Msg::BudgetCannotWait)) }
                } @else if w.kept_at.is_some() {
                    p.kept { (lang.t(Msg::KeptWorking)) }
                } @else {
                    form method="post" action={ "/containers/" (name) "/keep-working" } {
                        input type="hidden" name="csrf" value=(s.csrf);
                        button.keep-working type="submit" { (lang.t(Msg::KeepWorking)) }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct KeepWorkingForm {}

/// **Attach a GPU again**, then back to the container's page, which shows the operation's
/// progress through the GPUs it lists (a refusal is the page saying why).
pub async fn attach_gpus_again(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, _form): CsrfForm<KeepWorkingForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    crate::reclaim::reattach::attach_again(&ctl, s.caller, name.clone())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish())
}

/// Keep working, then back to the container's page (a refusal is the page saying why).
pub async fn keep_working(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, _form): CsrfForm<KeepWorkingForm>,
) -> Result<HttpResponse, PortalError> {
    let name = name.into_inner();
    crate::reclaim::warning::keep_working(&ctl, s.caller, name.clone())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/containers/{name}")))
        .finish())
}
