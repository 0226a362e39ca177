//! The admin page's fleet: the nodes with their GPUs and live use (which containers hold each
//! GPU and how much of its memory their processes use), the placement queue with each waiting
//! container's reason, and cordon, evacuate (after a page that says what it does) and restore as
//! plain forms. Reads and changes go through the actions behind `/api/v1/nodes`, `/api/v1/gpus`
//! and `/api/v1/instances`, which refuse anyone but an admin the changes.

use actix_web::{web, HttpResponse};
use cohort_proto::api::gpus::Gpu as WireGpu;
use cohort_proto::api::instances::{Instance as WireInstance, InstancePage, ObservedState};
use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy, Node as WireNode, NodeState};
use cohort_proto::api::users::Role;
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::layout;
use super::session::{CsrfForm, SignedIn};
use super::words;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::{instances, nodes};

/// Pages of `GET /api/v1/instances` read for one admin page (1000 instances each).
const MAX_PAGES: usize = 20;

/// A wire enum's snake_case name, as the API spells it.
fn text<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// Every instance the admin may see, page after page as the REST API serves them.
pub(super) async fn all_instances(
    ctl: &Controller,
    s: &SignedIn,
) -> Result<Vec<WireInstance>, ActionError> {
    let mut all = Vec::new();
    let mut after = None;
    for _ in 0..MAX_PAGES {
        let page = InstancePage {
            limit: Some(instances::manage::MAX_PAGE),
            after: after.take(),
        };
        let page = instances::manage::list(ctl, s.bearer.clone(), page).await?;
        let rows: Vec<WireInstance> =
            serde_json::from_slice(&page.json).map_err(|e| ActionError::Internal(e.to_string()))?;
        all.extend(rows);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    Ok(all)
}

fn node_actions(lang: Lang, s: &SignedIn, n: &WireNode) -> Markup {
    let at = format!("/admin/nodes/{}", n.name);
    html! {
        @if matches!(n.state, NodeState::Online | NodeState::Offline) {
            form.inline method="post" action={ (at) "/cordon" } {
                input type="hidden" name="csrf" value=(s.csrf);
                button type="submit" data-action="cordon" { (lang.t(Msg::Cordon)) }
            }
        }
        @if matches!(n.state, NodeState::Cordoned | NodeState::Evacuating) {
            form.inline method="post" action={ (at) "/restore" } {
                input type="hidden" name="csrf" value=(s.csrf);
                button type="submit" data-action="restore" { (lang.t(Msg::Uncordon)) }
            }
        }
        @if n.state != NodeState::Evacuating {
            a data-action="evacuate" href={ (at) "/evacuate" } { (lang.t(Msg::Evacuate)) }
        }
    }
}

/// The nodes table and the GPUs table with each GPU's holders and their processes' memory.
pub(super) fn fleet(
    lang: Lang,
    s: &SignedIn,
    fleet: &[WireNode],
    gpus: &[WireGpu],
    all: &[WireInstance],
) -> Markup {
    html! {
        h2 { (lang.t(Msg::Nodes)) }
        table #nodes {
            thead { tr {
                th scope="col" { (lang.t(Msg::Name)) }
                th scope="col" { (lang.t(Msg::Status)) }
                th scope="col" { "CPU" }
                th scope="col" { (lang.t(Msg::Memory)) }
                th scope="col" { (lang.t(Msg::Gpus)) }
                th scope="col" { (lang.t(Msg::Containers)) }
                th scope="col" { (lang.t(Msg::Actions)) }
            } }
            tbody {
                @for n in fleet {
                    tr data-node=(n.name) {
                        th scope="row" { (n.name) }
                        td.state data-state=(text(&n.state)) { (words::node(lang, n.state)) }
                        td { (n.cores) }
                        td { (gib(n.memory_bytes)) }
                        td { (n.gpus) }
                        td { (n.instances) }
                        td.node-actions { (node_actions(lang, s, n)) }
                    }
                }
            }
        }
        h2 { (lang.t(Msg::Gpus)) }
        @if gpus.is_empty() {
            p #no-gpus { (lang.t(Msg::NoGpus)) }
        } @else {
            table #gpus {
                thead { tr {
                    th scope="col" { (lang.t(Msg::Node)) }
                    th scope="col" { "GPU" }
                    th scope="col" { (lang.t(Msg::Model)) }
                    th scope="col" { (lang.t(Msg::Memory)) }
                    th scope="col" { (lang.t(Msg::InUse)) }
                    th scope="col" { (lang.t(Msg::UsedBy)) }
                    th scope="col" { (lang.t(Msg::GpuMemoryUsed)) }
                } }
                tbody {
                    @for g in gpus {
                        @let holders: Vec<&str> = all.iter()
                            .filter(|i| i.gpus.iter().any(|x| x.uuid == g.uuid))
                            .map(|i| i.name.as_str())
                            .collect();
                        @let used: u64 = all.iter()
                            .flat_map(|i| &i.gpu_usage)
                            .filter(|u| u.gpu == g.uuid)
                            .map(|u| u.memory_used_bytes)
                            .sum();
                        tr data-gpu=(g.uuid) {
                            td { (g.node) }
                            th scope="row" { (g.index) @if !g.present { " ✕" } }
                            td.model { (g.model) }
                            td { (gib(g.memory_bytes)) }
                            td.allocated { (g.allocated) " / " (g.share_limit) }
                            td.holders { (holders.join(", ")) }
                            td { (gib(used)) }
                        }
                    }
                }
            }
        }
    }
}

/// The queue: containers no node can hold now, with whose and why.
pub(super) fn queue(lang: Lang, all: &[WireInstance]) -> Markup {
    let waiting: Vec<&WireInstance> = all
        .iter()
        .filter(|i| i.observed_state == ObservedState::Queued)
        .collect();
    html! {
        h2 { (lang.t(Msg::Queue)) }
        @if waiting.is_empty() {
            p #queue-empty { (lang.t(Msg::QueueEmpty)) }
        } @else {
            table #queue {
                thead { tr {
                    th scope="col" { (lang.t(Msg::Name)) }
                    th scope="col" { (lang.t(Msg::Username)) }
                    th scope="col" { (lang.t(Msg::Code)) }
                    th scope="col" { (lang.t(Msg::Priority)) }
                    th scope="col" { (lang.t(Msg::WaitingSince)) }
                    th scope="col" { (lang.t(Msg::Reason)) }
                } }
                tbody {
                    @for i in &waiting {
                        tr data-name=(i.name) {
                            th scope="row" { (i.name) }
                            td { (i.owner) }
                            td { (i.course.as_deref().unwrap_or("—")) }
                            td { (i.priority) }
                            td { (i.created_at.format("%Y-%m-%d %H:%M UTC")) }
                            td.reason { (i.error.as_deref().map(|e| words::queue_reason(lang, e)).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn cordon(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    nodes::manage::cordon(&ctl, s.caller.clone(), name.into_inner())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(super::admin::back())
}

/// Back into placement, starting what an evacuation stopped (`cohort cluster restore`).
pub async fn restore(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    nodes::manage::restore(&ctl, s.caller.clone(), name.into_inner())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(super::admin::back())
}

/// What evacuating the node does to its containers, and the form that does it.
pub async fn confirm_evacuate(
    ctl: web::Data<Controller>,
    s: SignedIn,
    name: web::Path<String>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let refused = |e| PortalError::Action(lang, e);
    s.caller.require(Role::Admin).map_err(refused)?;
    let node = nodes::manage::get(&ctl, s.bearer.clone(), name.into_inner())
        .await
        .map_err(refused)?;
    let body = html! {
        p #evacuate-warning {
            (lang.t(Msg::EvacuateWarning)) " "
            strong { (node.name) } ": " (node.instances) " " (lang.t(Msg::Containers))
        }
        form.stacked method="post" action={ "/admin/nodes/" (node.name) "/evacuate" } {
            input type="hidden" name="csrf" value=(s.csrf);
            fieldset {
                legend { (lang.t(Msg::EvacuateHow)) }
                label {
                    input #policy-stop type="radio" name="policy" value="stop" checked;
                    " " (lang.t(Msg::EvacuateStop))
                }
                label {
                    input #policy-move type="radio" name="policy" value="move";
                    " " (lang.t(Msg::EvacuateMove))
                }
            }
            button #evacuate type="submit" { (lang.t(Msg::Evacuate)) " " (node.name) }
        }
        p { a href="/admin" { (lang.t(Msg::Back)) } }
    };
    Ok(layout::ok(&s, lang.t(Msg::Evacuate), body))
}

#[derive(Deserialize)]
pub struct EvacuateForm {
    #[serde(default)]
    policy: String,
}

pub async fn evacuate(
    ctl: web::Data<Controller>,
    name: web::Path<String>,
    CsrfForm(s, form): CsrfForm<EvacuateForm>,
) -> Result<HttpResponse, PortalError> {
    let policy = match form.policy.as_str() {
        "" | "stop" => EvacuatePolicy::Stop,
        "move" => EvacuatePolicy::Move,
        other => {
            let e = ActionError::invalid("policy", format!("{other:?} is not one of stop, move"));
            return Err(PortalError::Action(s.lang, e));
        }
    };
    nodes::manage::evacuate(
        &ctl,
        s.caller.clone(),
        name.into_inner(),
        EvacuateNode { policy },
    )
    .await
    .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(super::admin::back())
}
