//! The sign-in page, sign-out and the language switcher.

use actix_web::cookie::time::Duration as CookieDuration;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use maud::html;
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::{Lang, Msg, LANG_COOKIE};
use super::layout;
use super::session::{cookie, removal, CsrfForm, SignInForm, SESSION_COOKIE, SIGN_IN_COOKIE};
use crate::accounts::auth::new_secret;
use crate::accounts::sign_in;
use crate::app::state::Controller;
use crate::error::ActionError;

#[derive(Deserialize)]
pub struct Credentials {
    username: String,
    password: String,
}

/// The form, with a fresh double-submit token in both the cookie and the field.
fn form(lang: Lang, status: StatusCode, username: &str, error: Option<&str>) -> HttpResponse {
    let token = new_secret();
    let mut res = layout::page(
        status,
        lang,
        None,
        lang.t(Msg::SignIn),
        html! {
            form.signin method="post" action="/signin" {
                input type="hidden" name="csrf" value=(token);
                @if let Some(error) = error {
                    p.error #signin-error role="alert" { (error) }
                }
                label for="username" { (lang.t(Msg::Username)) }
                input #username name="username" type="text" autocomplete="username"
                    required value=(username) autofocus;
                label for="password" { (lang.t(Msg::Password)) }
                input #password name="password" type="password"
                    autocomplete="current-password" required;
                button #signin type="submit" { (lang.t(Msg::SignIn)) }
            }
        },
    );
    // A new response's cookie jar takes it; the builder already ran.
    let _ = res.add_cookie(&cookie(SIGN_IN_COOKIE, token, CookieDuration::hours(1)));
    res
}

pub async fn page(req: HttpRequest) -> HttpResponse {
    form(Lang::of(&req), StatusCode::OK, "", None)
}

pub async fn submit(
    ctl: web::Data<Controller>,
    req: HttpRequest,
    SignInForm(creds): SignInForm<Credentials>,
) -> Result<HttpResponse, PortalError> {
    let lang = Lang::of(&req);
    let source = req.peer_addr().map(|a| a.ip());
    let username = creds.username.trim().to_string();
    match sign_in::password(&ctl, username.clone(), creds.password, source).await {
        Ok(session) => {
            let max_age = (session.expires_at - chrono::Utc::now())
                .num_seconds()
                .max(0);
            let mut res = HttpResponse::SeeOther()
                .insert_header((header::LOCATION, "/"))
                .finish();
            let _ = res.add_cookie(&cookie(
                SESSION_COOKIE,
                session.secret,
                CookieDuration::seconds(max_age),
            ));
            let _ = res.add_cookie(&removal(SIGN_IN_COOKIE));
            Ok(res)
        }
        Err(ActionError::Unauthenticated(_)) => Ok(form(
            lang,
            StatusCode::UNAUTHORIZED,
            &username,
            Some(lang.t(Msg::BadCredentials)),
        )),
        Err(ActionError::Directory(e)) => {
            tracing::warn!(error = %e, "directory sign-in failed");
            Ok(form(
                lang,
                StatusCode::SERVICE_UNAVAILABLE,
                &username,
                Some(lang.t(Msg::DirectoryUnavailable)),
            ))
        }
        Err(ActionError::Throttled { retry_after_s }) => {
            let mut res = form(
                lang,
                StatusCode::TOO_MANY_REQUESTS,
                &username,
                Some(lang.t(Msg::TooManyFailures)),
            );
            res.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(retry_after_s),
            );
            Ok(res)
        }
        Err(e) => Err(PortalError::Action(lang, e)),
    }
}

#[derive(Deserialize)]
pub struct Empty {}

pub async fn sign_out(
    ctl: web::Data<Controller>,
    req: HttpRequest,
    CsrfForm(s, Empty {}): CsrfForm<Empty>,
) -> Result<HttpResponse, PortalError> {
    let secret = req
        .cookie(SESSION_COOKIE)
        .map(|c| c.value().to_string())
        .unwrap_or_default();
    sign_in::sign_out(&ctl, s.caller, secret)
        .await
        .map_err(|e| PortalError::Action(s.lang, e))?;
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/signin"))
        .finish();
    let _ = res.add_cookie(&removal(SESSION_COOKIE));
    Ok(res)
}

#[derive(Deserialize)]
pub struct Next {
    next: Option<String>,
}

/// `next` as a path of this site, or `None`: it must be a path, without control characters, and
/// still name this origin once resolved as a browser resolves it (which drops tabs and newlines,
/// turns `\\` into `/`, and reads `//host` as another host). What is sent back is the resolved
/// path and query, never the text as given.
fn same_origin_path(next: &str) -> Option<String> {
    if !next.starts_with('/') || next.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return None;
    }
    let base = url::Url::parse("https://portal.invalid/").ok()?;
    let resolved = base.join(next).ok()?;
    if resolved.origin() != base.origin() {
        return None;
    }
    let mut path = resolved.path().to_string();
    if path.starts_with("//") {
        return None;
    }
    if let Some(query) = resolved.query() {
        path.push('?');
        path.push_str(query);
    }
    Some(path)
}

/// Keeps the chosen language in a cookie and goes back to the page it was chosen on (only a
/// path on this site: never an open redirect).
pub async fn switch_language(
    req: HttpRequest,
    tag: web::Path<String>,
    query: web::Query<Next>,
) -> HttpResponse {
    let back = req
        .headers()
        .get(header::REFERER)
        .and_then(|r| r.to_str().ok())
        .and_then(|r| url::Url::parse(r).ok())
        .map(|u| u.path().to_string());
    let next = query
        .next
        .as_deref()
        .or(back.as_deref())
        .and_then(same_origin_path)
        .unwrap_or_else(|| "/".into());
    let mut res = HttpResponse::SeeOther()
        .insert_header((header::LOCATION, next))
        .finish();
    if let Some(lang) = Lang::from_tag(&tag) {
        let _ = res.add_cookie(&cookie(
            LANG_COOKIE,
            lang.tag().to_string(),
            CookieDuration::days(365),
        ));
    }
    res
}
