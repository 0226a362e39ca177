//! Batch jobs on the portal (issue 44): `/jobs` lists the jobs the caller may see (a student's
//! own, an instructor's courses' queues) with a form to submit one in one of their containers;
//! `/jobs/{id}` shows one with its output, tailed live by the page's script from
//! `/jobs/{id}/log` while it runs, and **Cancel the job**. Each calls the same action as the
//! API (`crate::batch`).

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::batch_jobs::{Job, SubmitJob};
use cohort_proto::api::courses::GpuHours;
use cohort_proto::api::instances::DesiredState;
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::layout;
use super::session::{CsrfForm, SignedIn};
use crate::accounts::users;
use crate::app::state::Controller;
use crate::batch::{self, ListFilter};
use crate::error::ActionError;

/// The submit form as posted: the command is a shell line (`sh -c`), as in a terminal.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct SubmitForm {
    #[serde(default)]
    instance: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    gpus: Option<u32>,
    #[serde(default)]
    hours: Option<f64>,
    #[serde(default)]
    workdir: String,
}

/// A refused submit, shown at its field.
struct Refusal {
    form: SubmitForm,
    field: &'static str,
    message: String,
}

const FIELDS: [&str; 5] = ["instance", "command", "gpus", "hours", "workdir"];

/// `GET /jobs`.
pub async fn page(ctl: web::Data<Controller>, s: SignedIn) -> Result<HttpResponse, PortalError> {
    render(&ctl, &s, StatusCode::OK, None).await
}

async fn render(
    ctl: &Controller,
    s: &SignedIn,
    status: StatusCode,
    refusal: Option<Refusal>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let me = users::me(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let jobs = batch::list(ctl, s.bearer.clone(), ListFilter::default())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let running: Vec<String> = me
        .instances
        .iter()
        .filter(|i| i.desired_state == DesiredState::Running)
        .map(|i| i.name.clone())
        .collect();
    let form = refusal.as_ref().map(|r| r.form.clone()).unwrap_or_default();
    let error_at = |field: &str| -> Markup {
        match &refusal {
            Some(r) if r.field == field => {
                html! { p.error id={ "job-" (field) "-error" } { (r.message) } }
            }
            _ => html! {},
        }
    };
    let body = html! {
        p { (lang.t(Msg::JobsNote)) }
        @if !running.is_empty() {
            form #submit-job method="post" action="/jobs" {
                input type="hidden" name="csrf" value=(s.csrf);
                label { (lang.t(Msg::JobContainer)) " "
                    select #job-instance name="instance" {
                        @for name in &running {
                            option value=(name) selected[*name == form.instance] { (name) }
                        }
                    }
                }
                (error_at("instance"))
                label { (lang.t(Msg::JobCommand)) " "
                    input #job-command type="text" name="command" required value=(form.command)
                        placeholder=(lang.t(Msg::JobCommandHint));
                }
                (error_at("command"))
                label { (lang.t(Msg::JobGpus)) " "
                    input #job-gpus type="number" name="gpus" min="0" step="1"
                        value=(form.gpus.unwrap_or(0));
                }
                (error_at("gpus"))
                label { (lang.t(Msg::JobHours)) " "
                    input #job-hours type="number" name="hours" min="0.01" step="0.01"
                        value=(form.hours.unwrap_or(2.0));
                }
                (error_at("hours"))
                label { (lang.t(Msg::JobWorkdir)) " "
                    input #job-workdir type="text" name="workdir" value=(form.workdir);
                }
                (error_at("workdir"))
                (error_at("jobs"))
                button type="submit" #submit-job-button { (lang.t(Msg::SubmitJob)) }
            }
        }
        (table(lang, &jobs))
    };
    Ok(layout::page(status, lang, Some(s), lang.t(Msg::Jobs), body))
}

fn table(lang: Lang, jobs: &[Job]) -> Markup {
    html! {
        @if jobs.is_empty() {
            p #no-jobs { (lang.t(Msg::NoJobs)) }
        } @else {
            table #jobs {
                thead { tr {
                    th { "#" } th { (lang.t(Msg::JobContainer)) } th { (lang.t(Msg::JobState)) }
                    th { (lang.t(Msg::JobGpus)) } th { (lang.t(Msg::JobPlace)) }
                    th { (lang.t(Msg::JobExit)) } th { (lang.t(Msg::JobCommand)) }
                } }
                tbody {
                    @for j in jobs {
                        tr data-job=(j.id) {
                            td { a href={ "/jobs/" (j.id) } { (j.id) } }
                            td { (j.instance) " (" (j.username) ")" }
                            td.state { (j.state) }
                            td { (j.gpus) }
                            td { @if let Some(p) = j.place { (p) ": " } (j.why.as_deref().unwrap_or("")) }
                            td { (j.exit_code.map_or_else(String::new, |c| c.to_string())) }
                            td { code { (j.command.join(" ")) } }
                        }
                    }
                }
            }
        }
    }
}

/// `POST /jobs`: the job submitted, then its page; a refusal back on the form at its field.
pub async fn submit(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<SubmitForm>,
) -> Result<HttpResponse, PortalError> {
    let command = if form.command.trim().is_empty() {
        Vec::new()
    } else {
        vec!["sh".into(), "-c".into(), form.command.clone()]
    };
    let req = SubmitJob {
        instance: form.instance.clone(),
        command,
        gpus: form.gpus,
        hours: form.hours.map(GpuHours),
        workdir: Some(form.workdir.trim().to_string()).filter(|w| !w.is_empty()),
        environment: Default::default(),
    };
    match batch::submit(&ctl, s.caller.clone(), req).await {
        Ok(job) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/jobs/{}", job.id)))
            .finish()),
        Err(ActionError::Invalid { field, message }) => {
            let field = FIELDS
                .into_iter()
                .find(|f| field.starts_with(f))
                .unwrap_or("command");
            render(
                &ctl,
                &s,
                StatusCode::BAD_REQUEST,
                Some(Refusal {
                    form,
                    field,
                    message,
                }),
            )
            .await
        }
        Err(ActionError::Conflict { message, .. }) => {
            let refusal = Refusal {
                form,
                field: "jobs",
                message,
            };
            render(&ctl, &s, StatusCode::CONFLICT, Some(refusal)).await
        }
        Err(e) => Err(PortalError::Action(s.lang, e)),
    }
}

/// `GET /jobs/{id}`: the job, its output tailed live while it runs.
pub async fn show(
    ctl: web::Data<Controller>,
    s: SignedIn,
    id: web::Path<i64>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let j = batch::show(&ctl, s.caller.clone(), id.into_inner())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let body = html! {
        dl #job {
            dt { (lang.t(Msg::JobContainer)) } dd { (j.instance) " (" (j.username) ")" }
            dt { (lang.t(Msg::JobCommand)) } dd { code { (j.command.join(" ")) } }
            dt { (lang.t(Msg::JobState)) } dd #job-state { (j.state) }
            @if let Some(why) = &j.why {
                dt { (lang.t(Msg::JobPlace)) } dd #job-why { (j.place.unwrap_or(0)) ": " (why) }
            }
            dt { (lang.t(Msg::JobGpus)) } dd { (j.gpus) @if let Some(g) = &j.gpu { " (" (g) ")" } }
            @if let Some(c) = j.exit_code {
                dt { (lang.t(Msg::JobExit)) } dd #job-exit { (c) }
            }
            @if let Some(r) = &j.reason {
                dt { (lang.t(Msg::JobReason)) } dd #job-reason { (r) }
            }
        }
        @if !j.state.is_final() {
            form method="post" action={ "/jobs/" (j.id) "/cancel" } {
                input type="hidden" name="csrf" value=(s.csrf);
                button type="submit" #cancel-job { (lang.t(Msg::CancelJob)) }
            }
        }
        h2 { (lang.t(Msg::JobLog)) " " small { code { (j.log_path) } } }
        pre #job-log data-job=(j.id) data-done=(j.state.is_final()) {}
    };
    Ok(layout::ok(
        &s,
        &format!("{} {}", lang.t(Msg::Jobs), j.id),
        body,
    ))
}

#[derive(Debug, Default, Deserialize)]
pub struct LogQuery {
    #[serde(default)]
    offset: u64,
}

/// `GET /jobs/{id}/log?offset=N`: the page's script reads the output from here (JSON, as the
/// API's `JobLog`).
pub async fn log(
    ctl: web::Data<Controller>,
    s: SignedIn,
    id: web::Path<i64>,
    query: web::Query<LogQuery>,
) -> Result<HttpResponse, PortalError> {
    let log = batch::log(&ctl, s.caller.clone(), id.into_inner(), query.offset)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(log))
}

#[derive(Debug, Deserialize)]
pub struct CancelForm {}

/// `POST /jobs/{id}/cancel`, then back to the job's page.
pub async fn cancel(
    ctl: web::Data<Controller>,
    id: web::Path<i64>,
    CsrfForm(s, _): CsrfForm<CancelForm>,
) -> Result<HttpResponse, PortalError> {
    let id = id.into_inner();
    batch::cancel(&ctl, s.caller, id)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/jobs/{id}")))
        .finish())
}
