//! The course page's limits section: each student's container as the course makes it (cores,
//! memory, disk, GPUs, idle stop), and the form that changes the cores, memory and disk
//! (`PUT /courses/{code}/limits`) and the home volume's size (`PUT /courses/{code}/home`)
//! through the same actions, a refusal shown at its field. The section says what a change
//! reaches, follows the operation that applies it to the containers already made, and lists
//! the containers that keep other limits, with why.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::{Course, CourseHome, CourseLimits, KeptLimits};
use maud::{html, Markup};
use serde::Deserialize;
use uuid::Uuid;

use super::courses::{number, render, Refused};
use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::courses::course;
use crate::courses::limits;
use crate::error::ActionError;

/// The home size's field, as the action names it.
pub const HOME_FIELD: &str = "home_mib";

/// The form's number fields, named as the actions name them.
const FIELDS: [&str; 4] = ["cpu", "memory_mib", "disk_gib", HOME_FIELD];

/// What was typed; empty is "keep" for cores, memory and disk, the controller's default for
/// the home.
#[derive(Debug, Default, Deserialize)]
pub struct LimitsForm {
    #[serde(default)]
    cpu: String,
    #[serde(default)]
    memory_mib: String,
    #[serde(default)]
    disk_gib: String,
    #[serde(default)]
    home_mib: String,
}

/// A refused form: what was typed, the field (`limits` for a refusal of the whole change, such
/// as the course's quota) and the action's message.
pub struct Refusal {
    form: LimitsForm,
    field: &'static str,
    message: String,
}

impl Refusal {
    /// The action's refusal `field` with `message`, at its field when the form has one.
    pub fn new(form: LimitsForm, field: &str, message: String) -> Refusal {
        let field = FIELDS.into_iter().find(|f| *f == field).unwrap_or("limits");
        Refusal {
            form,
            field,
            message,
        }
    }
}

/// The section; `kept` are the containers already made with other limits.
pub fn section(
    s: &SignedIn,
    course: &Course,
    kept: &[KeptLimits],
    refusal: Option<&Refusal>,
) -> Markup {
    let lang = s.lang;
    let minutes = |m: Option<u32>| m.map_or_else(|| "—".to_string(), |m| format!("{m} min"));
    let error = |name: &str| {
        html! {
            @if let Some(r) = refusal.filter(|r| r.field == name) {
                p.error id={ (name) "-error" } role="alert" { (r.message) }
            }
        }
    };
    // A refused form comes back as typed; otherwise the course's values.
    let value = |name: &str| -> Option<String> {
        match refusal.map(|r| &r.form) {
            Some(f) => Some(
                match name {
                    "cpu" => &f.cpu,
                    "memory_mib" => &f.memory_mib,
                    "disk_gib" => &f.disk_gib,
                    _ => &f.home_mib,
                }
                .clone(),
            ),
            None => match name {
                "cpu" => Some(course.cpu.to_string()),
                "memory_mib" => Some(course.memory_mib.to_string()),
                "disk_gib" => Some(course.disk_gib.to_string()),
                _ => course.home_mib.map(|m| m.to_string()),
            },
        }
    };
    html! {
        h2 { (lang.t(Msg::CourseLimits)) }
        dl.facts #course-limits {
            dt { (lang.t(Msg::Cpu)) } dd #limit-cpu { (course.cpu) }
            dt { (lang.t(Msg::MemoryMib)) } dd #limit-memory { (course.memory_mib) }
            dt { (lang.t(Msg::DiskGib)) } dd #limit-disk { (course.disk_gib) }
            dt { (lang.t(Msg::GpusPerStudent)) } dd #limit-gpus { (course.gpus) }
            dt { (lang.t(Msg::IdleStop)) } dd #limit-idle { (minutes(course.idle_gpu_minutes)) " (" (course.idle_action) ")" }
            dt { (lang.t(Msg::LongestRun)) } dd #limit-runtime { (minutes(course.max_runtime_minutes)) }
            dt { (lang.t(Msg::WarnBefore)) } dd #limit-warn { (minutes(Some(course.warn_minutes))) }
        }
        form.stacked #limits-form method="post" action={ "/courses/" (course.code) "/limits" } {
            input type="hidden" name="csrf" value=(s.csrf);
            p #limits-apply { (lang.t(Msg::LimitsApplyToNew)) }
            (error("limits"))
            @for (name, label) in [("cpu", Msg::Cpu), ("memory_mib", Msg::MemoryMib), ("disk_gib", Msg::DiskGib)] {
                label for=(name) { (lang.t(label)) }
                input id=(name) name=(name) type="number" min="1" required value=[value(name)];
                (error(name))
            }
            label for=(HOME_FIELD) { (lang.t(Msg::HomeMib)) }
            input id=(HOME_FIELD) name=(HOME_FIELD) type="number" min="1" placeholder=(lang.t(Msg::ControllerDefault))
                value=[value(HOME_FIELD)];
            (error(HOME_FIELD))
            button #set-limits type="submit" { (lang.t(Msg::SaveLimits)) }
        }
        @if !kept.is_empty() {
            p #limits-kept-note { (lang.t(Msg::LimitsKept)) }
            table #limits-kept {
                thead { tr {
                    th scope="col" { (lang.t(Msg::Container)) }
                    th scope="col" { (lang.t(Msg::Username)) }
                    th scope="col" { (lang.t(Msg::CpuCores)) }
                    th scope="col" { (lang.t(Msg::MemoryMibOwn)) }
                    th scope="col" { (lang.t(Msg::DiskGibOwn)) }
                    th scope="col" { (lang.t(Msg::WhyKept)) }
                } }
                tbody {
                    @for k in kept {
                        tr data-instance=(k.instance) {
                            td { (k.instance) } td { (k.owner) }
                            td.cpu { (k.cpu) } td.memory { (k.memory_mib) } td.disk { (k.disk_gib) }
                            td.reason { (k.reason) }
                        }
                    }
                }
            }
        }
    }
}

/// The form as the actions' requests: a field that is not a whole number is refused at it.
fn request(form: &LimitsForm) -> Result<(CourseLimits, Option<u64>), ActionError> {
    let cpu = number("cpu", &form.cpu)?
        .map(|n| u32::try_from(n).map_err(|_| ActionError::invalid("cpu", "is too large")))
        .transpose()?;
    let limits = CourseLimits {
        cpu,
        memory_mib: number("memory_mib", &form.memory_mib)?,
        disk_gib: number("disk_gib", &form.disk_gib)?,
    };
    Ok((limits, number(HOME_FIELD, &form.home_mib)?))
}

/// Changes what differs from the course as it is: the limits first, then the home. The home's
/// size is checked before either, so a refused home leaves the limits as they were too. The
/// operation applying new cores and memory to the containers already made, if there is one.
async fn apply(
    ctl: &Controller,
    s: &SignedIn,
    code: &str,
    form: &LimitsForm,
) -> Result<Option<Uuid>, ActionError> {
    let (limits, home_mib) = request(form)?;
    crate::placement::home_size::check(HOME_FIELD, home_mib)?;
    let course = course::get(ctl, s.bearer.clone(), code.to_string()).await?;
    let changes = limits.cpu.is_some_and(|v| v != course.cpu)
        || limits.memory_mib.is_some_and(|v| v != course.memory_mib)
        || limits.disk_gib.is_some_and(|v| v != course.disk_gib);
    let mut operation = None;
    if changes {
        let change = limits::set(ctl, s.caller.clone(), code.to_string(), limits).await?;
        operation = change.operation.map(|op| op.id);
    }
    if home_mib != course.home_mib {
        let home = CourseHome { home_mib };
        course::set_home(ctl, s.caller.clone(), code.to_string(), home).await?;
    }
    Ok(operation)
}

/// `POST /courses/{code}/limits`.
pub async fn set(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, form): CsrfForm<LimitsForm>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    let (status, field, message) = match apply(&ctl, &s, &code, &form).await {
        Ok(operation) => {
            // With an operation, the page follows it as it follows a provision.
            let to = match operation {
                Some(id) => format!("/courses/{code}?operation={id}"),
                None => format!("/courses/{code}"),
            };
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, to))
                .finish());
        }
        Err(ActionError::Invalid { field, message }) => (StatusCode::BAD_REQUEST, field, message),
        Err(ActionError::Conflict {
            field: Some(field),
            message,
        }) => (StatusCode::CONFLICT, field, message),
        Err(e) => return Err(PortalError::Action(s.lang, e)),
    };
    let refused = Refused::Limits(Refusal::new(form, &field, message));
    render(&ctl, &s, code, None, status, Some(refused)).await
}
