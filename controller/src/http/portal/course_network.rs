//! The course page's network policy section: the policy as it is, and a plain form that sets it
//! through the same action as `PUT /api/v1/courses/{code}/network` (egress open, none or an
//! allow-list of destinations; the sources that may reach SSH), a refusal shown at its field.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::{Course, Egress, NetworkPolicy};
use maud::{html, Markup};
use serde::Deserialize;

use super::courses::{render, Refused};
use super::error::PortalError;
use super::i18n::Msg;
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::courses::network;
use crate::error::ActionError;

/// What was typed: `egress` is `open`, `none` or `allow`; the lists are one entry a line.
#[derive(Debug, Default, Deserialize)]
pub struct NetworkForm {
    #[serde(default)]
    egress: String,
    #[serde(default)]
    allow: String,
    #[serde(default)]
    ssh_from: String,
}

/// A refused form: what was typed, the form's field (`egress`, `allow`, `ssh_from`, or
/// `network` for the form as a whole) and the message.
pub struct Refusal {
    form: NetworkForm,
    field: &'static str,
    message: String,
}

/// The action's field (`network.egress.allow[1]`) as the form's (`allow`).
fn form_field(field: &str) -> &'static str {
    let field = field.strip_prefix("network.").unwrap_or(field);
    if field.starts_with("egress.allow") {
        "allow"
    } else if field.starts_with("ssh_from") {
        "ssh_from"
    } else if field == "egress" {
        "egress"
    } else {
        "network"
    }
}

/// The entries of a textarea: one a line (commas too), blanks dropped.
fn entries(text: &str) -> Vec<String> {
    text.split(['\n', ','])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(String::from)
        .collect()
}

fn policy(form: &NetworkForm) -> Result<NetworkPolicy, ActionError> {
    let egress = match form.egress.as_str() {
        "open" => Egress::Open,
        "none" => Egress::None,
        "allow" => Egress::Allow(entries(&form.allow)),
        _ => {
            return Err(ActionError::invalid(
                "network.egress",
                "must be open, none or allow",
            ))
        }
    };
    Ok(NetworkPolicy {
        egress,
        ssh_from: entries(&form.ssh_from),
    })
}

/// The section: the policy now, and the form (as typed when it was refused).
pub fn section(s: &SignedIn, course: &Course, refusal: Option<&Refusal>) -> Markup {
    let lang = s.lang;
    let now = &course.network;
    let (egress, allow, ssh_from) = match refusal {
        Some(r) => (
            r.form.egress.clone(),
            r.form.allow.clone(),
            r.form.ssh_from.clone(),
        ),
        None => {
            let (kind, list) = match &now.egress {
                Egress::Open => ("open", Vec::new()),
                Egress::None => ("none", Vec::new()),
                Egress::Allow(list) => ("allow", list.clone()),
            };
            (kind.to_string(), list.join("\n"), now.ssh_from.join("\n"))
        }
    };
    let error = |name: &str| {
        html! {
            @if let Some(r) = refusal.filter(|r| r.field == name) {
                p.error id={ (name) "-error" } role="alert" { (r.message) }
            }
        }
    };
    html! {
        h2 { (lang.t(Msg::NetworkPolicy)) }
        dl.facts #network-now {
            dt { (lang.t(Msg::Egress)) }
            dd #network-egress {
                @match &now.egress {
                    Egress::Open => { (lang.t(Msg::EgressOpen)) }
                    Egress::None => { (lang.t(Msg::EgressNone)) }
                    Egress::Allow(list) => { (lang.t(Msg::EgressAllow)) ": " (list.join(", ")) }
                }
            }
            dt { (lang.t(Msg::SshFrom)) }
            dd #network-ssh-from {
                @if now.ssh_from.is_empty() { (lang.t(Msg::Anywhere)) } @else { (now.ssh_from.join(", ")) }
            }
        }
        form.stacked #network-form method="post" action={ "/courses/" (course.code) "/network" } {
            input type="hidden" name="csrf" value=(s.csrf);
            p #network-apply { (lang.t(Msg::NetworkApplies)) }
            (error("network"))
            fieldset #egress {
                legend { (lang.t(Msg::Egress)) }
                @for (value, label) in [("open", Msg::EgressOpen), ("none", Msg::EgressNone), ("allow", Msg::EgressAllow)] {
                    label {
                        input type="radio" name="egress" id={ "egress-" (value) } value=(value) checked[egress == value];
                        " " (lang.t(label))
                    }
                }
            }
            (error("egress"))
            label for="allow" { (lang.t(Msg::AllowList)) }
            textarea #allow name="allow" rows="4" { (allow) }
            (error("allow"))
            label for="ssh_from" { (lang.t(Msg::SshFromList)) }
            textarea #ssh_from name="ssh_from" rows="3" { (ssh_from) }
            (error("ssh_from"))
            button #set-network type="submit" { (lang.t(Msg::SaveNetwork)) }
        }
    }
}

/// `POST /courses/{code}/network`.
pub async fn set(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, form): CsrfForm<NetworkForm>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    let outcome = match policy(&form) {
        Ok(p) => network::set(&ctl, s.caller.clone(), code.clone(), p)
            .await
            .map(drop),
        Err(e) => Err(e),
    };
    let (field, message) = match outcome {
        Ok(()) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/courses/{code}")))
                .finish())
        }
        Err(ActionError::Invalid { field, message }) => (field, message),
        Err(e) => return Err(PortalError::Action(s.lang, e)),
    };
    // Which entry: the action counts the list's entries from 0; the form shows lines.
    let message = match at_entry(&field).and_then(|i| entry(&form, &field, i)) {
        Some(entry) => format!("{entry:?}: {message}"),
        None => message,
    };
    let refused = Refused::Network(Refusal {
        field: form_field(&field),
        form,
        message,
    });
    render(&ctl, &s, code, None, StatusCode::BAD_REQUEST, Some(refused)).await
}

/// The index in a field such as `network.ssh_from[2]`.
fn at_entry(field: &str) -> Option<usize> {
    field.strip_suffix(']')?.rsplit_once('[')?.1.parse().ok()
}

/// The entry typed at index `i` of the list `field` names.
fn entry(form: &NetworkForm, field: &str, i: usize) -> Option<String> {
    let text = match form_field(field) {
        "allow" => &form.allow,
        "ssh_from" => &form.ssh_from,
        _ => return None,
    };
    entries(text).into_iter().nth(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_actions_fields_are_the_forms_and_entries_are_lines() {
        assert_eq!(form_field("network.egress.allow[1]"), "allow");
        assert_eq!(form_field("network.egress.allow"), "allow");
        assert_eq!(form_field("network.ssh_from[0]"), "ssh_from");
        assert_eq!(form_field("network.egress"), "egress");
        assert_eq!(form_field("code"), "network");
        assert_eq!(at_entry("network.ssh_from[12]"), Some(12));
        assert_eq!(at_entry("network.egress"), None);
        assert_eq!(
            entries(" 10.0.0.0/8:3128\r\n\n192.0.2.1, 198.51.100.0/24 "),
            ["10.0.0.0/8:3128", "192.0.2.1", "198.51.100.0/24"]
        );
    }
}
