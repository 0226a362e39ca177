//! The signed-in person's own account: their SSH keys (add, remove) and their portal password.
//! A refused input is shown next to the field it concerns, with the REST API's status.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use cohort_proto::api::users::{AddSshKey, Me};
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Msg;
use super::layout;
use super::session::{CsrfForm, SignedIn};
use crate::accounts::sign_in;
use crate::accounts::users;
use crate::app::state::Controller;
use crate::error::ActionError;

/// An input refused by an action: (field, message).
type FieldError = Option<(String, String)>;

fn error_for(error: &FieldError, field: &str) -> Markup {
    html! {
        @if let Some((f, message)) = error {
            @if f == field {
                p.error id={ (field) "-error" } role="alert" { (message) }
            }
        }
    }
}

fn render(s: &SignedIn, me: &Me, status: StatusCode, error: FieldError) -> HttpResponse {
    let lang = s.lang;
    let body = html! {
        p { a #tokens-link href="/account/tokens" { (lang.t(Msg::ApiTokens)) } }
        h2 { (lang.t(Msg::SshKeys)) }
        @if me.ssh_keys.is_empty() {
            p #no-keys { (lang.t(Msg::NoKeys)) }
        } @else {
            ul #keys {
                @for key in &me.ssh_keys {
                    li data-fingerprint=(key.fingerprint) {
                        code { (key.fingerprint) }
                        form.inline method="post" action={ "/account/keys/" (key.id) "/delete" } {
                            input type="hidden" name="csrf" value=(s.csrf);
                            button type="submit" { (lang.t(Msg::Remove)) }
                        }
                    }
                }
            }
        }
        form.stacked method="post" action="/account/keys" {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="public_key" { (lang.t(Msg::PublicKey)) }
            textarea #public_key name="public_key" rows="3" required {}
            (error_for(&error, "public_key"))
            button #add-key type="submit" { (lang.t(Msg::AddKey)) }
        }
        h2 { (lang.t(Msg::ChangePassword)) }
        form.stacked method="post" action="/account/password" {
            input type="hidden" name="csrf" value=(s.csrf);
            label for="current_password" { (lang.t(Msg::CurrentPassword)) }
            input #current_password name="current_password" type="password"
                autocomplete="current-password" required;
            (error_for(&error, "current_password"))
            label for="new_password" { (lang.t(Msg::NewPassword)) }
            input #new_password name="new_password" type="password"
                autocomplete="new-password" required minlength=(sign_in::MIN_PASSWORD_LEN);
            (error_for(&error, "new_password"))
            button #change-password type="submit" { (lang.t(Msg::ChangePassword)) }
        }
    };
    layout::page(status, lang, Some(s), lang.t(Msg::Account), body)
}

async fn me(ctl: &Controller, s: &SignedIn) -> Result<Me, PortalError> {
    users::me(ctl, s.bearer.clone())
        .await
        .map_err(|e| PortalError::Action(s.lang, e))
}

/// Back to the account page after a change, or the page again with the refusal at its field.
async fn answer(
    ctl: &Controller,
    s: &SignedIn,
    outcome: Result<(), ActionError>,
) -> Result<HttpResponse, PortalError> {
    match outcome {
        Ok(()) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, "/account"))
            .finish()),
        Err(ActionError::Invalid { field, message }) => {
            let me = me(ctl, s).await?;
            Ok(render(
                s,
                &me,
                StatusCode::BAD_REQUEST,
                Some((field, message)),
            ))
        }
        Err(e) => Err(PortalError::Action(s.lang, e)),
    }
}

pub async fn page(ctl: web::Data<Controller>, s: SignedIn) -> Result<HttpResponse, PortalError> {
    let me = me(&ctl, &s).await?;
    Ok(render(&s, &me, StatusCode::OK, None))
}

#[derive(Deserialize)]
pub struct KeyForm {
    public_key: String,
}

pub async fn add_key(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<KeyForm>,
) -> Result<HttpResponse, PortalError> {
    let req = AddSshKey {
        public_key: form.public_key,
    };
    let outcome = users::add_ssh_key(&ctl, s.caller.clone(), req)
        .await
        .map(|_| ());
    answer(&ctl, &s, outcome).await
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn remove_key(
    ctl: web::Data<Controller>,
    id: web::Path<i64>,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let outcome = users::delete_ssh_key(&ctl, s.caller.clone(), id.into_inner()).await;
    answer(&ctl, &s, outcome).await
}

#[derive(Deserialize)]
pub struct PasswordForm {
    current_password: String,
    new_password: String,
}

pub async fn change_password(
    ctl: web::Data<Controller>,
    CsrfForm(s, form): CsrfForm<PasswordForm>,
) -> Result<HttpResponse, PortalError> {
    let outcome = sign_in::change_own(
        &ctl,
        s.caller.clone(),
        s.session_id,
        form.current_password,
        form.new_password,
    )
    .await;
    answer(&ctl, &s, outcome).await
}
