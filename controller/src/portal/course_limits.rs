//! The course page's limits section: each student's container as the course made it (cores,
//! memory, disk, GPUs, idle stop), and the form for the one limit the API lets an instructor
//! change afterwards, the size of each student's home volume (`PUT /courses/{code}/home`,
//! `cohort course set --home-size`), through the same action, a refusal shown at the field.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::{Course, CourseHome};
use maud::{html, Markup};
use serde::Deserialize;

use super::courses::render;
use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::actions::courses;
use crate::controller::Controller;
use crate::error::ActionError;

/// The form's field, as the action names it.
pub const HOME_FIELD: &str = "home_mib";

/// The section; `error` is the action's refusal of the home size.
pub fn section(s: &SignedIn, course: &Course, error: Option<&str>) -> Markup {
    let lang = s.lang;
    let minutes = |m: Option<u32>| m.map_or_else(|| "—".to_string(), |m| format!("{m} min"));
    html! {
        h2 { (lang.t(Msg::CourseLimits)) }
        dl.facts #course-limits {
            dt { (lang.t(Msg::Cpu)) } dd #limit-cpu { (course.cpu) }
            dt { (lang.t(Msg::MemoryMib)) } dd #limit-memory { (course.memory_mib) }
            dt { (lang.t(Msg::DiskGib)) } dd #limit-disk { (course.disk_gib) }
            dt { (lang.t(Msg::GpusPerStudent)) } dd #limit-gpus { (course.gpus) }
            dt { (lang.t(Msg::IdleStop)) } dd #limit-idle { (minutes(course.idle_gpu_minutes)) " (" (course.idle_action) ")" }
            dt { (lang.t(Msg::LongestRun)) } dd #limit-runtime { (minutes(course.max_runtime_minutes)) }
        }
        form.stacked method="post" action={ "/courses/" (course.code) "/limits" } {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="home_mib" { (lang.t(Msg::HomeMib)) }
            input #home_mib name="home_mib" type="number" min="1" placeholder=(lang.t(Msg::ControllerDefault))
                value=[course.home_mib];
            @if let Some(message) = error {
                p.error #home_mib-error role="alert" { (message) }
            }
            button #set-limits type="submit" { (lang.t(Msg::SaveLimits)) }
        }
    }
}

#[derive(Deserialize)]
pub struct LimitsForm {
    #[serde(default)]
    home_mib: String,
}

/// `POST /courses/{code}/limits`: empty is the controller's default.
pub async fn set(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, form): CsrfForm<LimitsForm>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    let home_mib = match form.home_mib.trim() {
        "" => Ok(None),
        v => v
            .parse()
            .map(Some)
            .map_err(|_| ActionError::invalid(HOME_FIELD, "must be a whole number")),
    };
    let outcome = match home_mib {
        Ok(home_mib) => {
            courses::set_home(
                &ctl,
                s.caller.clone(),
                code.clone(),
                CourseHome { home_mib },
            )
            .await
        }
        Err(e) => Err(e),
    };
    match outcome {
        Ok(_) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/courses/{code}")))
            .finish()),
        Err(ActionError::Invalid { field, message }) => {
            let error = Some((field, message));
            render(&ctl, &s, code, None, StatusCode::BAD_REQUEST, error).await
        }
        Err(e) => Err(PortalError::Action(s.lang, e)),
    }
}
