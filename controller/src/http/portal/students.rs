//! An instructor's page for one student's container in a course: its snapshots (take one,
//! restore one), reset with a confirmation that says what is lost and what is kept, removing
//! the student (home kept unless asked), and the course's teardown. The same actions as `/api/v1/courses/{code}/students/{username}/...` and
//! `/api/v1/courses/{code}/teardown`, which refuse anyone but the course's instructors and admins.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::{StudentSnapshot, Teardown};
use maud::html;
use serde::Deserialize;

use super::courses::{render, Refused};
use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::courses::containers;

#[derive(Deserialize)]
pub struct StudentPage {
    code: String,
    username: String,
}

pub async fn page(
    ctl: web::Data<Controller>,
    s: SignedIn,
    path: web::Path<StudentPage>,
) -> Result<HttpResponse, PortalError> {
    let StudentPage { code, username } = path.into_inner();
    let lang = s.lang;
    let snapshots =
        containers::student_snapshots(&ctl, s.caller.clone(), code.clone(), username.clone())
            .await
            .map_err(|e| PortalError::Action(lang, e))?;
    let here = format!("/courses/{code}/students/{username}");
    let body = html! {
        p { a href={ "/courses/" (code) } { (lang.t(Msg::Back)) } }
        h2 { (lang.t(Msg::Snapshots)) }
        @if snapshots.is_empty() {
            p #no-snapshots { (lang.t(Msg::NoSnapshots)) }
        } @else {
            ul #snapshots {
                @for snap in &snapshots {
                    li data-snapshot=(snap.name) {
                        code { (snap.name) }
                        @if let Some(at) = snap.created_at { " " (at.format("%Y-%m-%d %H:%M UTC")) }
                        form.inline method="post" action={ (here) "/snapshots/" (snap.name) "/restore" } {
                            input type="hidden" name="csrf" value=(s.csrf);
                            button type="submit" data-action="restore" { (lang.t(Msg::Restore)) }
                        }
                    }
                }
            }
        }
        form.stacked method="post" action={ (here) "/snapshots" } {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="snapshot-name" { (lang.t(Msg::SnapshotName)) }
            input #snapshot-name name="name" type="text" maxlength="63";
            button #take-snapshot type="submit" { (lang.t(Msg::TakeSnapshot)) }
        }
        h2 { (lang.t(Msg::Reset)) }
        form.stacked method="post" action={ (here) "/reset" } {
            input type="hidden" name="csrf" value=(s.csrf);
            p #reset-warning { (lang.t(Msg::ResetWarning)) }
            button #reset type="submit" { (lang.t(Msg::Reset)) }
        }
        h2 { (lang.t(Msg::RemoveStudent)) }
        form.stacked method="post" action={ (here) "/remove" } {
            input type="hidden" name="csrf" value=(s.csrf);
            p #remove-warning { (lang.t(Msg::RemoveStudentWarning)) }
            label {
                input #delete-home type="checkbox" name="delete_home" value="yes";
                " " (lang.t(Msg::DeleteHome))
            }
            button #remove-student type="submit" { (lang.t(Msg::RemoveStudent)) }
        }
    };
    Ok(layout::page(
        StatusCode::OK,
        lang,
        Some(&s),
        &format!("{code}: {username}"),
        body,
    ))
}

fn back_to(path: String) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, path))
        .finish()
}

#[derive(Deserialize)]
pub struct SnapshotForm {
    #[serde(default)]
    name: String,
}

pub async fn snapshot(
    ctl: web::Data<Controller>,
    path: web::Path<StudentPage>,
    CsrfForm(s, form): CsrfForm<SnapshotForm>,
) -> Result<HttpResponse, PortalError> {
    let StudentPage { code, username } = path.into_inner();
    let name = Some(form.name.trim().to_string()).filter(|n| !n.is_empty());
    let req = StudentSnapshot { name };
    containers::student_snapshot(&ctl, s.caller.clone(), code.clone(), username.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(back_to(format!("/courses/{code}/students/{username}")))
}

#[derive(Deserialize)]
pub struct RestorePath {
    code: String,
    username: String,
    snapshot: String,
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn restore(
    ctl: web::Data<Controller>,
    path: web::Path<RestorePath>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let RestorePath {
        code,
        username,
        snapshot,
    } = path.into_inner();
    containers::student_restore(
        &ctl,
        s.caller.clone(),
        code.clone(),
        username.clone(),
        snapshot,
    )
    .await
    .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(back_to(format!("/courses/{code}/students/{username}")))
}

#[derive(Deserialize)]
pub struct TeardownForm {
    /// `stop` (default) or `delete`.
    #[serde(default)]
    mode: String,
    /// The form's confirmation box: `yes` when ticked.
    #[serde(default)]
    confirm: String,
    /// `yes` when the box to archive the homes first is ticked.
    #[serde(default)]
    archive: String,
}

/// Stops, or deletes, every container of the course (homes kept unless deleted with them).
pub async fn teardown_course(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, form): CsrfForm<TeardownForm>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    if form.confirm != "yes" {
        let refused = Some(Refused::TeardownUnconfirmed);
        return render(&ctl, &s, code, None, StatusCode::BAD_REQUEST, refused).await;
    }
    let delete = form.mode == "delete";
    let req = Teardown {
        delete,
        keep_homes: true,
        archive: form.archive == "yes",
    };
    let op = containers::teardown(&ctl, s.caller.clone(), code.clone(), req)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    // The course page follows its progress, and says what each container became.
    let mode = if delete { "delete" } else { "stop" };
    Ok(back_to(format!(
        "/courses/{code}?operation={}&teardown={mode}",
        op.id
    )))
}

#[derive(Deserialize)]
pub struct RemoveForm {
    /// `yes` when the box to delete the home is ticked (an unticked box sends nothing).
    #[serde(default)]
    delete_home: Option<String>,
}

/// Removes the student from the course: their container goes, their home only if asked.
pub async fn remove(
    ctl: web::Data<Controller>,
    path: web::Path<StudentPage>,
    CsrfForm(s, form): CsrfForm<RemoveForm>,
) -> Result<HttpResponse, PortalError> {
    let StudentPage { code, username } = path.into_inner();
    let delete_home = form.delete_home.is_some();
    containers::remove_student(&ctl, s.caller.clone(), code.clone(), username, delete_home)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(back_to(format!("/courses/{code}")))
}
