//! The signed-in person's API tokens for the CLI: listed (never their secret), made with a name
//! and an expiry (the secret shown once, on the answer to the form, never cached), and revoked,
//! through the same actions as `/api/v1/users/{username}/tokens`.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::users::{ApiToken, ApiTokenIssued, CreateApiToken};
use maud::html;
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::{CsrfForm, SignedIn};
use crate::accounts::tokens;
use crate::app::state::Controller;
use crate::error::ActionError;

fn render(
    ctl: &Controller,
    s: &SignedIn,
    list: &[ApiToken],
    status: StatusCode,
    issued: Option<&ApiTokenIssued>,
    error: Option<(String, String)>,
) -> HttpResponse {
    let lang = s.lang;
    let error_for = |field: &str| {
        html! {
            @if let Some((f, message)) = &error {
                @if f == field {
                    p.error id={ (field) "-error" } role="alert" { (message) }
                }
            }
        }
    };
    let body = html! {
        @if let Some(issued) = issued {
            section #new-token aria-live="polite" {
                p { (lang.t(Msg::TokenShownOnce)) }
                pre { code #new-token-secret { (issued.token) } }
                button type="button" data-copy="new-token-secret" { (lang.t(Msg::Copy)) }
            }
        }
        @if list.is_empty() {
            p #no-tokens { (lang.t(Msg::NoTokens)) }
        } @else {
            table #tokens {
                thead { tr {
                    th { (lang.t(Msg::Name)) }
                    th { (lang.t(Msg::Expires)) }
                    th { (lang.t(Msg::Actions)) }
                } }
                tbody {
                    @for t in list {
                        tr data-id=(t.id) {
                            td.name { (t.name.as_deref().unwrap_or("")) }
                            td.expires {
                                (t.expires_at.format("%Y-%m-%d %H:%M UTC"))
                                @if t.expired { " (" (lang.t(Msg::Expired)) ")" }
                            }
                            td {
                                form.inline method="post" action={ "/account/tokens/" (t.id) "/revoke" } {
                                    input type="hidden" name="csrf" value=(s.csrf);
                                    button type="submit" { (lang.t(Msg::Revoke)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { (lang.t(Msg::NewToken)) }
        form.stacked method="post" action="/account/tokens" {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="token-name" { (lang.t(Msg::Name)) }
            input #token-name name="name" type="text" maxlength="200";
            (error_for("name"))
            label for="token-days" { (lang.t(Msg::ExpiresInDays)) }
            input #token-days name="expires_in_days" type="number" min="1"
                max=(ctl.config.auth.token_max_days) value=(ctl.config.auth.token_days) required;
            (error_for("expires_in_days"))
            button #create-token type="submit" { (lang.t(Msg::NewToken)) }
        }
    };
    let mut res = layout::page(status, lang, Some(s), lang.t(Msg::ApiTokens), body);
    // The page may hold a secret: no cache keeps it.
    res.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    res
}

async fn answer(
    ctl: &Controller,
    s: &SignedIn,
    status: StatusCode,
    issued: Option<&ApiTokenIssued>,
    error: Option<(String, String)>,
) -> Result<HttpResponse, PortalError> {
    let list = tokens::list(ctl, s.caller.clone(), s.caller.name().to_string())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(render(ctl, s, &list, status, issued, error))
}

pub async fn page(ctl: web::Data<Controller>, s: SignedIn) -> Result<HttpResponse, PortalError> {
    answer(&ctl, &s, StatusCode::OK, None, None).await
}

#[derive(Deserialize)]
pub struct NewTokenForm {
    #[serde(default)]
    name: String,
    expires_in_days: String,
}

pub async fn create(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<NewTokenForm>,
) -> Result<HttpResponse, PortalError> {
    let Ok(days) = form.expires_in_days.trim().parse::<u32>() else {
        let message = format!("must be 1 to {} days", ctl.config.auth.token_max_days);
        let error = Some(("expires_in_days".to_string(), message));
        return answer(&ctl, &s, StatusCode::BAD_REQUEST, None, error).await;
    };
    let name = Some(form.name.trim().to_string()).filter(|n| !n.is_empty());
    let req = CreateApiToken {
        name,
        expires_in_days: Some(days),
    };
    let username = s.caller.name().to_string();
    match tokens::issue(&ctl, s.caller.clone(), username, req).await {
        Ok(issued) => answer(&ctl, &s, StatusCode::CREATED, Some(&issued), None).await,
        Err(ActionError::Invalid { field, message }) => {
            let error = Some((field, message));
            answer(&ctl, &s, StatusCode::BAD_REQUEST, None, error).await
        }
        Err(e) => Err(PortalError::Action(s.lang, e)),
    }
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn revoke(
    ctl: web::Data<Controller>,
    id: web::Path<i64>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let username = s.caller.name().to_string();
    tokens::revoke(&ctl, s.caller.clone(), username, id.into_inner())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/account/tokens"))
        .finish())
}
