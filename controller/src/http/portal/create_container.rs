//! The "Create Container" form on the containers page: a name, an image from the catalog and
//! resources within the caller's allowance (shown beside the fields), posted as a plain form and
//! handed to the same action as `POST /api/v1/instances`, whose refusals appear at their field.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse, ResponseError};
use cohort_proto::api::images::Image;
use cohort_proto::api::instances::{CreateInstance, Limits};
use cohort_proto::api::users::Role;
use maud::{html, Markup};
use serde::Deserialize;

use super::containers;
use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::instances::manage::{self, DEFAULT_LIMITS, STUDENT_MAX_INSTANCES};

/// What was typed, kept so a refused form comes back filled in.
#[derive(Debug, Default, Deserialize)]
pub struct NewContainerForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    image: String,
    #[serde(default)]
    cpu: String,
    #[serde(default)]
    memory_mib: String,
    #[serde(default)]
    disk_gib: String,
    #[serde(default)]
    gpus: String,
    #[serde(default)]
    gpu_model: String,
}

/// A refused form: what was typed, and the form's field the refusal concerns (`form` for the
/// form as a whole) with the action's message.
pub struct Refusal {
    form: NewContainerForm,
    field: &'static str,
    message: String,
}

/// The action's field names (`limits.cpu`) as the form's (`cpu`); any other is the whole form's.
fn form_field(field: &str) -> &'static str {
    match field {
        "name" => "name",
        "image" => "image",
        "limits.cpu" => "cpu",
        "limits.memory_mib" => "memory_mib",
        "limits.disk_gib" => "disk_gib",
        "gpus" => "gpus",
        "gpu_model" => "gpu_model",
        _ => "form",
    }
}

/// A number field: empty is the API's default, anything but a whole number is refused there.
fn number(field: &str, value: &str, default: u64) -> Result<u64, ActionError> {
    match value.trim() {
        "" => Ok(default),
        v => v
            .parse()
            .map_err(|_| ActionError::invalid(field, "must be a whole number")),
    }
}

fn request(form: &NewContainerForm) -> Result<CreateInstance, ActionError> {
    let cpu = number("limits.cpu", &form.cpu, DEFAULT_LIMITS.cpu.into())?;
    let limits = Limits {
        cpu: u32::try_from(cpu).map_err(|_| ActionError::invalid("limits.cpu", "is too large"))?,
        memory_mib: number(
            "limits.memory_mib",
            &form.memory_mib,
            DEFAULT_LIMITS.memory_mib,
        )?,
        disk_gib: number("limits.disk_gib", &form.disk_gib, DEFAULT_LIMITS.disk_gib)?,
    };
    let gpus = u32::try_from(number("gpus", &form.gpus, 0)?)
        .map_err(|_| ActionError::invalid("gpus", "is too large"))?;
    let gpu_model = Some(form.gpu_model.trim()).filter(|m| !m.is_empty());
    // Through the wire type's own decoding, so the form gets the API's defaults for the rest.
    let json = serde_json::json!({
        "name": form.name.trim(), "image": form.image.trim(), "limits": limits,
        "gpus": gpus, "gpu_model": gpu_model,
    });
    serde_json::from_value(json).map_err(|e| ActionError::invalid("name", e.to_string()))
}

/// The section on the containers page: the caller's allowance and the form, or why there is no
/// form (a student who owns the most containers a student may, an empty catalog). GPUs are
/// offered where the fleet has any (`gpu_models`, the models present), within the allowance,
/// and a model to choose where it has several.
pub fn section(
    s: &SignedIn,
    images: &[Image],
    gpu_models: &[String],
    owned: usize,
    refusal: Option<&Refusal>,
) -> Markup {
    let lang = s.lang;
    let allowance = manage::allowance(s.caller.role);
    let typed = refusal.map(|r| &r.form);
    let error = |name: &str| {
        html! {
            @if let Some(r) = refusal.filter(|r| r.field == name) {
                p.error id={ (name) "-error" } role="alert" { (r.message) }
            }
        }
    };
    let full = s.caller.role == Role::Student && owned >= STUDENT_MAX_INSTANCES;
    html! {
        section #create-container {
            h2 { (lang.t(Msg::CreateContainer)) }
            @if let Some((cpu, mem, disk, _)) = allowance {
                p #allowance {
                    (lang.t(Msg::YourAllowance)) " " (cpu) " CPU · " (mem) " MiB · " (disk) " GiB"
                    @if s.caller.role == Role::Student { " · " (lang.t(Msg::AtMostContainers)) " " (STUDENT_MAX_INSTANCES) }
                }
            }
            (error("form"))
            @if full {
                p #no-create { (lang.t(Msg::AllowanceUsed)) " (" (STUDENT_MAX_INSTANCES) ")" }
            } @else if images.is_empty() {
                p #no-create { (lang.t(Msg::NoImages)) }
            } @else {
                form.stacked method="post" action="/containers" {
                    input type="hidden" name="csrf" value=(s.csrf);
                    label for="new-name" { (lang.t(Msg::Name)) }
                    input #new-name name="name" type="text" required value=[typed.map(|f| &f.name)];
                    (error("name"))
                    label for="new-image" { (lang.t(Msg::CatalogImage)) }
                    select #new-image name="image" required {
                        @for i in images {
                            option value=(i.alias) selected[typed.is_some_and(|f| f.image == i.alias)] {
                                (i.alias) @if !i.description.is_empty() { " — " (i.description) }
                            }
                        }
                    }
                    (error("image"))
                    @for (name, label, default, most) in [
                        ("cpu", Msg::CpuCores, u64::from(DEFAULT_LIMITS.cpu), allowance.map(|a| u64::from(a.0))),
                        ("memory_mib", Msg::MemoryMibOwn, DEFAULT_LIMITS.memory_mib, allowance.map(|a| a.1)),
                        ("disk_gib", Msg::DiskGibOwn, DEFAULT_LIMITS.disk_gib, allowance.map(|a| a.2)),
                    ] {
                        label for={ "new-" (name) } {
                            (lang.t(label))
                            @if let Some(most) = most { " (" (lang.t(Msg::AtMost)) " " (most) ")" }
                        }
                        input id={ "new-" (name) } name=(name) type="number" min="1" placeholder=(default)
                            value=[typed.map(|f| match name { "cpu" => &f.cpu, "memory_mib" => &f.memory_mib, _ => &f.disk_gib })];
                        (error(name))
                    }
                    @if !gpu_models.is_empty() {
                        label for="new-gpus" {
                            (lang.t(Msg::GpuCount))
                            @if let Some((_, _, _, most)) = allowance { " (" (lang.t(Msg::AtMost)) " " (most) ")" }
                        }
                        input #new-gpus name="gpus" type="number" min="0"
                            max=[allowance.map(|a| a.3)] placeholder="0"
                            value=[typed.map(|f| &f.gpus)];
                        (error("gpus"))
                        @if gpu_models.len() > 1 {
                            label for="new-gpu-model" { (lang.t(Msg::GpuModel)) }
                            select #new-gpu-model name="gpu_model" {
                                option value="" { (lang.t(Msg::AnyGpuModel)) }
                                @for m in gpu_models {
                                    option value=(m) selected[typed.is_some_and(|f| &f.gpu_model == m)] { (m) }
                                }
                            }
                            (error("gpu_model"))
                        }
                    }
                    button #create-container-button type="submit" { (lang.t(Msg::CreateContainer)) }
                }
            }
        }
    }
}

/// `POST /containers`: creates through the API's action, then back to the containers page,
/// which shows the new container's state (and why it waits when it is queued).
pub async fn create(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<NewContainerForm>,
) -> Result<HttpResponse, PortalError> {
    let outcome = match request(&form) {
        Ok(req) => manage::create(&ctl, s.caller.clone(), req).await,
        Err(e) => Err(e),
    };
    let error = match outcome {
        Ok(_) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/"))
                .finish())
        }
        Err(e) => e,
    };
    // The refusals a person can fix in the form come back to it; anything else is an error page.
    let status: StatusCode = error.status_code();
    let (field, message) = match error {
        ActionError::Invalid { field, message } => (form_field(&field), message),
        ActionError::Conflict { field, message } => {
            (form_field(field.as_deref().unwrap_or("")), message)
        }
        ActionError::NoCapacity(message) => ("form", message),
        e => return Err(PortalError::Action(s.lang, e)),
    };
    let refusal = Refusal {
        form,
        field,
        message,
    };
    containers::render_home(&ctl, &s, status, Some(&refusal)).await
}
