//! The course page's roster section: a CSV pasted or dropped, imported through the same action
//! as `POST /api/v1/courses/{code}/roster`. A refused roster keeps what was pasted and lists each
//! bad row with its text and what is wrong with it (nothing is imported); an imported one says
//! what it did (accounts created, students enrolled, keys ignored for existing accounts) and
//! shows the passwords it generated this once, with a warning, since they are forgotten then.

use std::collections::HashSet;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use cohort_proto::api::courses::RosterReport;
use maud::{html, Markup};
use serde::Deserialize;

use super::courses::{render, Refused};
use super::error::PortalError;
use super::i18n::{Lang, Msg};
use super::session::{CsrfForm, SignedIn};
use crate::app::state::Controller;
use crate::courses::roster::{self, RosterError};
use crate::courses::{enrol, export};
use crate::error::ActionError;

/// What the roster form says back.
pub enum Answer {
    /// Nothing imported: the text as pasted, the message and each bad row (row, field, why).
    Refused {
        pasted: String,
        message: String,
        rows: Vec<(usize, String, String)>,
    },
    /// Imported: the action's report and the passwords it generated, shown on this page only.
    Imported {
        report: RosterReport,
        passwords: Vec<(String, String)>,
    },
}

#[derive(Deserialize)]
pub struct RosterForm {
    roster: String,
}

pub async fn import(
    ctl: web::Data<Controller>,
    code: web::Path<String>,
    CsrfForm(s, form): CsrfForm<RosterForm>,
) -> Result<HttpResponse, PortalError> {
    let code = code.into_inner();
    let pasted = form.roster;
    // The rows' own problems, each with its row, before the action refuses them as a whole.
    let rows = match roster::parse(pasted.as_bytes()) {
        Err(RosterError::Rows(rows)) => rows
            .into_iter()
            .map(|r| (r.row, r.field.to_string(), r.message))
            .collect(),
        _ => Vec::new(),
    };
    let outcome = enrol::import(
        &ctl,
        s.caller.clone(),
        code.clone(),
        pasted.clone().into_bytes(),
    )
    .await;
    let (status, answer) = match outcome {
        Ok(report) => {
            let passwords = if report.passwords_generated.is_empty() {
                Vec::new()
            } else {
                export::reveal_passwords(&ctl, s.caller.clone(), code.clone())
                    .await
                    .map_err(|e| PortalError::Action(s.lang, e))?
            };
            (StatusCode::OK, Answer::Imported { report, passwords })
        }
        Err(ActionError::Invalid { message, .. }) => (
            StatusCode::BAD_REQUEST,
            Answer::Refused {
                pasted,
                message,
                rows,
            },
        ),
        Err(e) => return Err(PortalError::Action(s.lang, e)),
    };
    render(&ctl, &s, code, None, status, Some(Refused::Roster(answer))).await
}

/// The pasted text's line for a CSV row as a spreadsheet counts it (the header is row 1).
fn line(pasted: &str, row: usize) -> &str {
    pasted.lines().nth(row.saturating_sub(1)).unwrap_or("")
}

/// The roster form, with what the last import said.
pub fn section(s: &SignedIn, code: &str, answer: Option<&Answer>) -> Markup {
    let lang = s.lang;
    let pasted = match answer {
        Some(Answer::Refused { pasted, .. }) => pasted.as_str(),
        _ => "",
    };
    html! {
        h2 { (lang.t(Msg::Roster)) }
        @if let Some(Answer::Imported { report, passwords }) = answer {
            (imported(lang, report, passwords))
        }
        form.stacked method="post" action={ "/courses/" (code) "/roster" } {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="roster-file" { (lang.t(Msg::RosterFile)) }
            input #roster-file type="file" accept=".csv,text/csv" data-fills="roster";
            label for="roster" { (lang.t(Msg::RosterText)) }
            textarea #roster name="roster" rows="6" required { (pasted) }
            @if let Some(Answer::Refused { message, rows, pasted }) = answer {
                p.error #roster-error role="alert" { (lang.t(Msg::RosterRefused)) " " (message) }
                @if !rows.is_empty() {
                    table #roster-rows {
                        thead { tr {
                            th scope="col" { (lang.t(Msg::RosterRow)) }
                            th scope="col" { (lang.t(Msg::RosterPasted)) }
                            th scope="col" { (lang.t(Msg::RosterWrong)) }
                        } }
                        tbody {
                            @for (row, field, why) in rows {
                                tr data-row=(row) {
                                    td { (row) }
                                    td { code { (line(pasted, *row)) } }
                                    td.error { (field) ": " (why) }
                                }
                            }
                        }
                    }
                }
            }
            button #import-roster type="submit" { (lang.t(Msg::ImportRoster)) }
        }
    }
}

/// What an import did, and the passwords it generated.
fn imported(lang: Lang, report: &RosterReport, passwords: &[(String, String)]) -> Markup {
    let existing: HashSet<&str> = report
        .existing_accounts
        .iter()
        .map(|a| a.username.as_str())
        .collect();
    let created: Vec<&str> = report
        .added
        .iter()
        .map(String::as_str)
        .filter(|u| !existing.contains(u))
        .collect();
    let ignored: Vec<&str> = report
        .existing_accounts
        .iter()
        .filter(|a| a.roster_key_ignored)
        .map(|a| a.username.as_str())
        .collect();
    let lines = [
        ("created", Msg::RosterCreated, created),
        (
            "enrolled",
            Msg::RosterEnrolled,
            report.added.iter().map(String::as_str).collect(),
        ),
        (
            "already-enrolled",
            Msg::RosterAlreadyEnrolled,
            report.already_enrolled.iter().map(String::as_str).collect(),
        ),
        ("keys-ignored", Msg::RosterKeysIgnored, ignored),
        (
            "not-in-roster",
            Msg::RosterNotInRoster,
            report.not_in_roster.iter().map(String::as_str).collect(),
        ),
    ];
    html! {
        div #roster-report role="status" {
            ul {
                @for (id, label, names) in &lines {
                    li id={ "roster-" (id) } data-count=(names.len()) {
                        (lang.t(*label)) ": " (names.len())
                        @if !names.is_empty() { " (" (names.join(", ")) ")" }
                    }
                }
            }
            @if !passwords.is_empty() {
                p.error #passwords-warning role="alert" { (lang.t(Msg::PasswordsShownOnce)) }
                table #passwords {
                    thead { tr {
                        th scope="col" { (lang.t(Msg::Username)) }
                        th scope="col" { (lang.t(Msg::Password)) }
                    } }
                    tbody {
                        @for (user, password) in passwords {
                            tr data-username=(user) { td { (user) } td.password { code { (password) } } }
                        }
                    }
                }
            }
        }
    }
}
