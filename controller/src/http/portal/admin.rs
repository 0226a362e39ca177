//! The admin's page: the fleet with its GPUs and the queue ([`super::admin_fleet`]), users and
//! roles ([`super::admin_users`]), and the audit log filtered by action or actor
//! (`GET /admin?action=failed_sign_in`), through the same actions as `/api/v1/nodes`,
//! `/api/v1/gpus`, `/api/v1/instances`, `/api/v1/users` and `/api/v1/audit`. Instructors may
//! read some of those through the API (their courses' audit entries, say), but the page is the
//! admin's: anyone else gets the 403 page.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::audit::AuditQuery;
use cohort_proto::api::users::Role;
use maud::html;
use serde::Deserialize;

use super::admin_fleet;
use super::admin_users::{self, RoleError};
use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::SignedIn;
use super::words;
use crate::accounts::users;
use crate::app::state::Controller;
use crate::audit;
use crate::nodes::gpus;
use crate::nodes::manage;

#[derive(Deserialize, Default)]
pub struct Filter {
    action: Option<String>,
    actor: Option<String>,
}

/// Back to the admin page after a change.
pub(super) fn back() -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/admin"))
        .finish()
}

pub async fn page(
    ctl: web::Data<Controller>,
    s: SignedIn,
    filter: web::Query<Filter>,
) -> Result<HttpResponse, PortalError> {
    render(&ctl, &s, filter.into_inner(), StatusCode::OK, None).await
}

/// The whole page, with a refused role change shown at its account's field.
pub(super) async fn render(
    ctl: &Controller,
    s: &SignedIn,
    filter: Filter,
    status: StatusCode,
    role_error: RoleError,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let refused = |e| PortalError::Action(lang, e);
    let Filter { action, actor } = filter;
    let action = action.filter(|a| !a.is_empty());
    let actor = actor.filter(|a| !a.is_empty());
    let query = AuditQuery {
        action: action.clone(),
        actor: actor.clone(),
        limit: Some(100),
        ..AuditQuery::default()
    };
    s.caller.require(Role::Admin).map_err(refused)?;
    let log = audit::list(ctl, s.caller.clone(), query)
        .await
        .map_err(refused)?;
    let fleet = manage::list(ctl, s.bearer.clone()).await.map_err(refused)?;
    let all_gpus = gpus::list(ctl, s.bearer.clone()).await.map_err(refused)?;
    let instances = admin_fleet::all_instances(ctl, s).await.map_err(refused)?;
    let accounts = users::list(ctl, s.bearer.clone()).await.map_err(refused)?;
    let body = html! {
        (admin_fleet::fleet(lang, s, &fleet, &all_gpus, &instances))
        (admin_fleet::queue(lang, &instances))
        (admin_users::users(lang, s, &accounts, &role_error))
        h2 { (lang.t(Msg::Audit)) }
        form method="get" action="/admin" {
            label for="filter-action" { (lang.t(Msg::AuditAction)) }
            input #filter-action name="action" type="text" value=[action.as_deref()];
            label for="filter-actor" { (lang.t(Msg::AuditActor)) }
            input #filter-actor name="actor" type="text" value=[actor.as_deref()];
            button #filter type="submit" { (lang.t(Msg::Filter)) }
        }
        table #audit {
            thead { tr {
                th scope="col" { (lang.t(Msg::When)) }
                th scope="col" { (lang.t(Msg::AuditActor)) }
                th scope="col" { (lang.t(Msg::AuditAction)) }
                th scope="col" { (lang.t(Msg::Name)) }
            } }
            tbody {
                @for e in &log.entries {
                    tr {
                        td { (e.created_at.format("%Y-%m-%d %H:%M:%S UTC")) }
                        td.actor { (e.actor) }
                        td.action data-action=(e.action) { (words::audit_action(lang, &e.action)) }
                        td { (words::audit_object(lang, &e.object_kind)) " " (e.object) }
                    }
                }
            }
        }
    };
    Ok(layout::page(
        status,
        lang,
        Some(s),
        lang.t(Msg::Admin),
        body,
    ))
}
