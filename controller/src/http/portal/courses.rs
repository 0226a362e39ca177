//! The instructor's pages: their courses, one course's class table, the roster pasted or
//! dropped as a CSV file (a bad row is shown with its row number and nothing is imported),
//! provisioning with live progress, and the endpoint downloads. Every step calls the same
//! action as `/api/v1/courses/...`, which decides who may do it.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use maud::{html, Markup};
use serde::Deserialize;
use uuid::Uuid;

use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::{CsrfForm, SignedIn};
use super::words;
use super::{course_data, course_limits, course_network, course_roster};
use crate::app::state::Controller;
use crate::courses::containers;
use crate::courses::course;
use crate::courses::export;
use crate::courses::limits;
use crate::courses::provision;
use crate::error::ActionError;
use crate::jobs::operations;
use cohort_proto::api::courses::{CreateCourse, StudentAction};
use cohort_proto::api::instances::ObservedState;
use cohort_proto::api::operations::OperationKind;

pub async fn list(ctl: web::Data<Controller>, s: SignedIn) -> Result<HttpResponse, PortalError> {
    render_list(&ctl, &s, StatusCode::OK, None).await
}

/// The course list with the new-course form; `error` is a refused field: (field, message).
async fn render_list(
    ctl: &Controller,
    s: &SignedIn,
    status: StatusCode,
    error: Option<(String, String)>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let mine = course::list(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let field = |name: &str| {
        html! {
            @if let Some((f, message)) = &error {
                @if f == name { p.error id={ (name) "-error" } role="alert" { (message) } }
            }
        }
    };
    Ok(layout::page(
        status,
        lang,
        Some(s),
        lang.t(Msg::MyCourses),
        html! {
            @if mine.is_empty() { p #no-courses { (lang.t(Msg::NoCourses)) } }
            @else {
                table #courses {
                    thead { tr {
                        th scope="col" { (lang.t(Msg::Code)) }
                        th scope="col" { (lang.t(Msg::CourseTitle)) }
                    } }
                    tbody {
                        @for c in &mine {
                            tr { td { a href={ "/courses/" (c.code) } { (c.code) } } td { (c.title) } }
                        }
                    }
                }
            }
            h2 { (lang.t(Msg::NewCourse)) }
            form.stacked method="post" action="/courses" {
                input type="hidden" name="csrf" value=(s.csrf);
                @for (name, label, kind, required) in [
                    ("code", Msg::Code, "text", true),
                    ("title", Msg::CourseTitle, "text", true),
                    ("image", Msg::Image, "text", true),
                    ("cpu", Msg::Cpu, "number", false),
                    ("memory_mib", Msg::MemoryMib, "number", false),
                    ("disk_gib", Msg::DiskGib, "number", false),
                ] {
                    label for={ "new-" (name) } { (lang.t(label)) }
                    input id={ "new-" (name) } name=(name) type=(kind) required[required] min=[(kind == "number").then_some("1")];
                    (field(name))
                }
                button #create-course type="submit" { (lang.t(Msg::CreateCourse)) }
            }
        },
    ))
}

/// The new-course form: empty numbers are left to the course's defaults.
#[derive(Deserialize)]
pub struct NewCourseForm {
    code: String,
    title: String,
    image: String,
    #[serde(default)]
    cpu: String,
    #[serde(default)]
    memory_mib: String,
    #[serde(default)]
    disk_gib: String,
}

/// A number field: empty is `None`, anything but a whole number is refused at the field.
pub(super) fn number(field: &str, value: &str) -> Result<Option<u64>, ActionError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    value
        .parse()
        .map(Some)
        .map_err(|_| ActionError::invalid(field, "must be a whole number"))
}

pub async fn create(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<NewCourseForm>,
) -> Result<HttpResponse, PortalError> {
    let request = (|| -> Result<CreateCourse, ActionError> {
        let cpu = number("cpu", &form.cpu)?
            .map(|n| u32::try_from(n).map_err(|_| ActionError::invalid("cpu", "is too large")))
            .transpose()?;
        let json = serde_json::json!({
            "code": form.code.trim(), "title": form.title.trim(), "image": form.image.trim(),
            "cpu": cpu, "memory_mib": number("memory_mib", &form.memory_mib)?,
            "disk_gib": number("disk_gib", &form.disk_gib)?,
        });
        serde_json::from_value(json).map_err(|e| ActionError::invalid("code", e.to_string()))
    })();
    let outcome = match request {
        Ok(req) => course::create(&ctl, s.caller.clone(), req).await,
        Err(e) => Err(e),
    };
    match outcome {
        Ok(course) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/courses/{}", course.code)))
            .finish()),
        Err(ActionError::Invalid { field, message }) => {
            render_list(&ctl, &s, StatusCode::BAD_REQUEST, Some((field, message))).await
        }
        Err(ActionError::Conflict {
            field: Some(field),
            message,
        }) => render_list(&ctl, &s, StatusCode::CONFLICT, Some((field, message))).await,
        Err(e) => Err(PortalError::Action(s.lang, e)),
    }
}

#[derive(Deserialize)]
pub struct StudentPath {
    code: String,
    username: String,
    action: StudentAction,
}

/// Start, stop or restart one student's container from the class table.
pub async fn student_action(
    ctl: web::Data<Controller>,
    path: web::Path<StudentPath>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let StudentPath {
        code,
        username,
        action,
    } = path.into_inner();
    containers::student_action(&ctl, s.caller.clone(), code.clone(), username, action)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/courses/{code}")))
        .finish())
}

/// A refused form on the course page, shown at its field in its own section.
pub(super) enum Refused {
    /// The roster form's answer: refused, or what the import did.
    Roster(course_roster::Answer),
    Limits(course_limits::Refusal),
    Network(course_network::Refusal),
    /// The teardown form sent without its confirmation.
    TeardownUnconfirmed,
}

#[derive(Deserialize)]
pub struct CourseQuery {
    operation: Option<Uuid>,
    /// `delete` when the operation is a teardown that deletes the containers.
    teardown: Option<String>,
}

/// The operation the page's progress bar follows.
#[derive(Clone, Copy)]
pub(super) struct ProgressOf {
    pub id: Uuid,
    /// A teardown that deletes (rather than stops) the containers.
    pub deleting: bool,
}

/// The course page; `refused` is a form refused at one of its fields.
pub(super) async fn render(
    ctl: &Controller,
    s: &SignedIn,
    code: String,
    operation: Option<ProgressOf>,
    status: StatusCode,
    refused: Option<Refused>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let students = course::students(ctl, s.caller.clone(), code.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let course = course::get(ctl, s.bearer.clone(), code.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let kept = limits::kept_by(ctl, s.caller.clone(), code.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let data_usage = course_data::usage_for(ctl, s, &code).await;
    let teardown_unconfirmed = matches!(refused, Some(Refused::TeardownUnconfirmed));
    let (roster_answer, limits_refusal, network_refusal) = match refused {
        Some(Refused::Roster(answer)) => (Some(answer), None, None),
        Some(Refused::Limits(r)) => (None, Some(r), None),
        Some(Refused::Network(r)) => (None, None, Some(r)),
        Some(Refused::TeardownUnconfirmed) | None => (None, None, None),
    };
    // The progress bar follows a provision, a teardown, or new limits applied to the
    // containers; `done` is what a student's row says once its item has succeeded.
    let (progress_title, done) = match operation {
        Some(o) => match operations::get(ctl, s.caller.clone(), o.id).await {
            Ok(op) if op.kind == OperationKind::SetCourseLimits => (Msg::ApplyingLimits, ""),
            Ok(op) if op.kind == OperationKind::TeardownCourse => {
                let word = if operation.is_some_and(|o| o.deleting) {
                    words::deleted(lang)
                } else {
                    words::observed(lang, ObservedState::Stopped)
                };
                (Msg::TearingDown, word)
            }
            _ => (Msg::Provisioning, words::ready(lang)),
        },
        None => (Msg::Provisioning, ""),
    };
    let body: Markup = html! {
        @if let Some(ProgressOf { id, .. }) = operation {
            section #progress data-operation=(id) data-words=(words::progress_words(lang))
                data-done=(done) aria-live="polite" {
                h2 { (lang.t(progress_title)) }
                progress #progress-bar max="1" value="0" {}
                span #progress-text {}
                p #progress-outcome {}
            }
        }
        h2 { (lang.t(Msg::Class)) }
        table #students {
            thead { tr {
                th scope="col" { (lang.t(Msg::Username)) }
                th scope="col" { (lang.t(Msg::Name)) }
                th scope="col" { (lang.t(Msg::Status)) }
                th scope="col" { (lang.t(Msg::Node)) }
                th scope="col" { "SSH" }
                th scope="col" { (lang.t(Msg::Actions)) }
            } }
            tbody {
                @for st in &students {
                    tr data-username=(st.username) data-instance=[st.instance.as_deref()] {
                        td { (st.username) }
                        td { (st.name.as_deref().unwrap_or("")) }
                        td.state data-state=[st.state.as_deref()] {
                            (st.state.as_deref().map(|w| words::observed_name(lang, w)).unwrap_or_else(|| "—".into()))
                            @if let Some(why) = &st.queue_reason {
                                br; span.queue-reason { (lang.t(Msg::Reason)) ": " (words::queue_reason(lang, why)) }
                            }
                        }
                        td { (st.node.as_deref().unwrap_or("—")) }
                        td { @if let Some(p) = st.ssh_port { (p) } }
                        td.actions {
                            @if st.instance.is_some() {
                                a.manage href={ "/courses/" (code) "/students/" (st.username) } { (lang.t(Msg::Manage)) }
                                @for (action, label) in [("start", Msg::Start), ("stop", Msg::Stop), ("restart", Msg::Restart)] {
                                    form.inline method="post" action={ "/courses/" (code) "/students/" (st.username) "/" (action) } {
                                        input type="hidden" name="csrf" value=(s.csrf);
                                        button type="submit" data-action=(action) { (lang.t(label)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        form method="post" action={ "/courses/" (code) "/provision" } {
            input type="hidden" name="csrf" value=(s.csrf);
            button #provision type="submit" { (lang.t(Msg::Provision)) }
        }
        (course_roster::section(s, &code, roster_answer.as_ref()))
        (course_limits::section(s, &course, &kept, limits_refusal.as_ref()))
        (course_network::section(s, &course, network_refusal.as_ref()))
        (course_data::section(s, &code, data_usage.as_ref()))
        @if !course.staff.is_empty() {
            h2 { (lang.t(Msg::Staff)) }
            ul #staff { @for name in &course.staff { li { (name) } } }
        }
        h2 { (lang.t(Msg::Teardown)) }
        form.stacked #teardown method="post" action={ "/courses/" (code) "/teardown" } {
            input type="hidden" name="csrf" value=(s.csrf);
            label { input type="radio" name="mode" value="stop" checked; " " (lang.t(Msg::TeardownStop)) }
            label { input type="radio" name="mode" value="delete"; " " (lang.t(Msg::TeardownDelete)) }
            label { input #teardown-archive type="checkbox" name="archive" value="yes"; " " (lang.t(Msg::ArchiveHomes)) }
            label { input #teardown-confirm type="checkbox" name="confirm" value="yes" required; " " (lang.t(Msg::TeardownConfirm)) }
            @if teardown_unconfirmed {
                p.error #teardown-error role="alert" { (lang.t(Msg::TeardownUnconfirmed)) }
            }
            button #teardown-course type="submit" { (lang.t(Msg::Teardown)) }
        }
        h2 { (lang.t(Msg::Downloads)) }
        ul #downloads {
            @for (format, label) in [("csv", "CSV"), ("json", "JSON"), ("ssh-config", "ssh_config"), ("known-hosts", "known_hosts")] {
                li { a href={ "/courses/" (code) "/endpoints/" (format) } download { (label) } }
            }
        }
    };
    Ok(layout::page(status, lang, Some(s), &code, body))
}

pub async fn show(
    ctl: web::Data<Controller>,
    s: SignedIn,
    code: web::Path<String>,
    query: web::Query<CourseQuery>,
) -> Result<HttpResponse, PortalError> {
    let operation = query.operation.map(|id| ProgressOf {
        id,
        deleting: query.teardown.as_deref() == Some("delete"),
    });
    render(&ctl, &s, code.into_inner(), operation, StatusCode::OK, None).await
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn provision(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    let op = match provision::provision(&ctl, s.caller.clone(), code.clone()).await {
        Ok(op) => op.id,
        // A second click while the first provision runs shows the first one's progress.
        Err(e @ ActionError::Conflict { .. }) => {
            match provision::running(&ctl, s.caller.clone(), code.clone()).await {
                Ok(Some(id)) => id,
                _ => return Err(PortalError::Action(s.lang, e)),
            }
        }
        Err(e) => return Err(PortalError::Action(s.lang, e)),
    };
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, format!("/courses/{code}?operation={op}")))
        .finish())
}

/// An operation as JSON for the progress bar's polling (the same view as `/api/v1/operations`).
pub async fn progress(
    ctl: web::Data<Controller>,
    s: SignedIn,
    id: web::Path<Uuid>,
) -> Result<HttpResponse, PortalError> {
    let op = operations::get(&ctl, s.caller, id.into_inner())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(op))
}

pub async fn download(
    ctl: web::Data<Controller>,
    s: SignedIn,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, PortalError> {
    let (code, format) = path.into_inner();
    let lang = s.lang;
    let format = export::Format::parse(Some(&format)).map_err(|e| PortalError::Action(lang, e))?;
    let rows = export::list(&ctl, s.caller, code.clone(), format)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let file = match format {
        export::Format::Csv => format!("{code}-endpoints.csv"),
        export::Format::Json => format!("{code}-endpoints.json"),
        export::Format::SshConfig => format!("{code}-ssh_config"),
        export::Format::KnownHosts => format!("{code}-known_hosts"),
    };
    Ok(HttpResponse::Ok()
        .content_type(format.content_type())
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{file}\""),
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(export::render(&rows, format)))
}
