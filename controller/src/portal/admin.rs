//! The admin's page: the nodes with their state and capacity, and the audit log filtered by
//! action or actor (`GET /admin?action=failed_sign_in`), through the same actions as
//! `/api/v1/nodes` and `/api/v1/audit`, which refuse anyone but an admin.

use actix_web::{web, HttpResponse};
use cohort_proto::api::audit::AuditQuery;
use maud::html;
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::SignedIn;
use crate::actions::{audit, nodes};
use crate::controller::Controller;

#[derive(Deserialize)]
pub struct Filter {
    action: Option<String>,
    actor: Option<String>,
}

fn text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

pub async fn page(
    ctl: web::Data<Controller>,
    s: SignedIn,
    filter: web::Query<Filter>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let Filter { action, actor } = filter.into_inner();
    let action = action.filter(|a| !a.is_empty());
    let actor = actor.filter(|a| !a.is_empty());
    let query = AuditQuery {
        action: action.clone(),
        actor: actor.clone(),
        limit: Some(100),
        ..AuditQuery::default()
    };
    let log = audit::list(&ctl, s.caller.clone(), query)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let fleet = nodes::list(&ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    Ok(layout::ok(
        &s,
        lang.t(Msg::Admin),
        html! {
            h2 { (lang.t(Msg::Nodes)) }
            table #nodes {
                thead { tr {
                    th scope="col" { (lang.t(Msg::Name)) }
                    th scope="col" { (lang.t(Msg::Status)) }
                    th scope="col" { "CPU" }
                } }
                tbody {
                    @for n in &fleet {
                        tr data-node=(n.name) { td { (n.name) } td { (text(&n.state)) } td { (n.cores) } }
                    }
                }
            }
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
                            td.action { (e.action) }
                            td { (e.object_kind) " " (e.object) }
                        }
                    }
                }
            }
        },
    ))
}
