//! The admin page's users and roles: every account with its role, and a form per account that
//! changes it through the action behind `PUT /api/v1/users/{username}/role`. A refusal (one's
//! own role, an instructor who still teaches) is shown next to that account's role field.

use actix_web::{web, HttpResponse, ResponseError};
use cohort_proto::api::users::{Role, SetRole, User as WireUser};
use maud::{html, Markup};
use serde::Deserialize;

use super::admin::{self, Filter};
use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::session::{CsrfForm, SignedIn};
use crate::accounts::roles;
use crate::app::state::Controller;
use crate::error::ActionError;

/// A role change refused by the action: (username, message).
pub type RoleError = Option<(String, String)>;

const ROLES: [(Role, &str, Msg); 3] = [
    (Role::Student, "student", Msg::RoleStudent),
    (Role::Instructor, "instructor", Msg::RoleInstructor),
    (Role::Admin, "admin", Msg::RoleAdmin),
];

fn role_label(lang: Lang, role: Role) -> &'static str {
    ROLES
        .iter()
        .find(|(r, _, _)| *r == role)
        .map_or("", |(_, _, m)| lang.t(*m))
}

pub(super) fn users(lang: Lang, s: &SignedIn, all: &[WireUser], error: &RoleError) -> Markup {
    html! {
        h2 { (lang.t(Msg::UsersAndRoles)) }
        table #users {
            thead { tr {
                th scope="col" { (lang.t(Msg::Username)) }
                th scope="col" { (lang.t(Msg::Name)) }
                th scope="col" { (lang.t(Msg::Role)) }
                th scope="col" { (lang.t(Msg::ChangeRole)) }
            } }
            tbody {
                @for u in all {
                    @let field = format!("role-{}", u.username);
                    tr data-user=(u.username) {
                        th scope="row" {
                            (u.username)
                            @if u.disabled_at.is_some() { " (" (lang.t(Msg::Disabled)) ")" }
                        }
                        td { (u.full_name.as_deref().unwrap_or("")) }
                        td.role { (role_label(lang, u.role)) }
                        td {
                            form.inline method="post" action={ "/admin/users/" (u.username) "/role" } {
                                input type="hidden" name="csrf" value=(s.csrf);
                                label.visually-hidden for=(field) { (lang.t(Msg::Role)) " " (u.username) }
                                select id=(field) name="role" {
                                    @for (role, name, _) in ROLES {
                                        option value=(name) selected[role == u.role] { (role_label(lang, role)) }
                                    }
                                }
                                button type="submit" data-action="set-role" { (lang.t(Msg::ChangeRole)) }
                                @if let Some((who, message)) = error {
                                    @if *who == u.username {
                                        p.error id={ (field) "-error" } role="alert" { (message) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct RoleForm {
    #[serde(default)]
    role: String,
}

pub async fn set_role(
    ctl: web::Data<Controller>,
    username: web::Path<String>,
    CsrfForm(s, form): CsrfForm<RoleForm>,
) -> Result<HttpResponse, PortalError> {
    let username = username.into_inner();
    let outcome = match ROLES.iter().find(|(_, name, _)| *name == form.role) {
        Some((role, _, _)) => {
            let req = SetRole { role: *role };
            roles::set_role(&ctl, s.caller.clone(), username.clone(), req).await
        }
        None => Err(ActionError::invalid(
            "role",
            format!("{:?} is not one of student, instructor, admin", form.role),
        )),
    };
    let e = match outcome {
        Ok(_) => return Ok(admin::back()),
        Err(e) => e,
    };
    let message = match &e {
        ActionError::Invalid { field, message }
        | ActionError::Conflict {
            field: Some(field),
            message,
        } if field == "role" => message.clone(),
        _ => return Err(PortalError::Action(s.lang, e)),
    };
    let status = e.status_code();
    admin::render(
        &ctl,
        &s,
        Filter::default(),
        status,
        Some((username, message)),
    )
    .await
}
