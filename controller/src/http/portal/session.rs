//! Browser sessions and CSRF: the session cookie (Secure, HttpOnly, SameSite=Strict) carries a
//! random secret of which the database keeps only the SHA-256; [`SignedIn`] resolves it on every
//! page; [`CsrfForm`] is the only way a page takes a form, and it refuses one whose `csrf` field
//! is not the session's token before anything else is read. The sign-in form, which has no
//! session yet, is guarded by a double-submit cookie instead.

use std::future::Future;
use std::pin::Pin;

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Lang;
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;

/// The session cookie. `__Host-`: the browser takes it only from this very host, without a
/// `Domain`, so a page on another host under the same domain (a notebook's own origin) can
/// neither set nor shadow it.
pub const SESSION_COOKIE: &str = "__Host-cohort_session";
/// The sign-in form's double-submit cookie (`__Host-` for the same reason).
pub const SIGN_IN_COOKIE: &str = "__Host-cohort_sign_in";
/// Largest form body a page accepts.
const FORM_LIMIT: usize = 64 << 10;

/// A cookie as every portal cookie is: only over HTTPS, out of reach of scripts, never sent on a
/// request another site started.
pub fn cookie(name: &'static str, value: String, max_age: CookieDuration) -> Cookie<'static> {
    Cookie::build(name, value)
        .path("/")
        .secure(true)
        .http_only(true)
        .same_site(SameSite::Strict)
        .max_age(max_age)
        .finish()
}

/// The cookie that ends a session in the browser.
pub fn removal(name: &'static str) -> Cookie<'static> {
    cookie(name, String::new(), CookieDuration::ZERO)
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A signed-in browser: its user, the session's CSRF token and the language of its pages.
pub struct SignedIn {
    pub caller: Caller,
    pub bearer: Bearer,
    pub session_id: i64,
    pub csrf: String,
    pub lang: Lang,
}

fn controller(req: &HttpRequest) -> Result<web::Data<Controller>, PortalError> {
    req.app_data::<web::Data<Controller>>()
        .cloned()
        .ok_or(PortalError::Action(
            Lang::En,
            crate::error::ActionError::Internal("controller state missing".into()),
        ))
}

async fn resolve(req: HttpRequest) -> Result<SignedIn, PortalError> {
    let lang = Lang::of(&req);
    let ctl = controller(&req)?;
    let secret = req
        .cookie(SESSION_COOKIE)
        .map(|c| c.value().to_string())
        .filter(|s| !s.is_empty())
        .ok_or(PortalError::SignInFirst)?;
    let bearer = Bearer::portal_session(&secret);
    let hash = crate::accounts::auth::sha256(&secret);
    let found = crate::accounts::sign_in::live_session(&ctl, hash)
        .await
        .map_err(|e| PortalError::Action(lang, e))?;
    let (session, user) = found.ok_or(PortalError::SignInFirst)?;
    Ok(SignedIn {
        caller: Caller::new(user),
        bearer,
        session_id: session.id,
        csrf: session.csrf_token,
        lang,
    })
}

impl FromRequest for SignedIn {
    type Error = PortalError;
    type Future = Pin<Box<dyn Future<Output = Result<SignedIn, PortalError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        Box::pin(resolve(req.clone()))
    }
}

#[derive(Deserialize)]
struct CsrfField {
    #[serde(default)]
    csrf: String,
}

/// Reads a urlencoded form body of at most [`FORM_LIMIT`] bytes.
async fn read_form(mut payload: Payload, lang: Lang) -> Result<web::Bytes, PortalError> {
    let mut body = web::BytesMut::new();
    while let Some(chunk) = payload.next().await {
        let chunk = chunk.map_err(|_| PortalError::BadForm(lang))?;
        if body.len() + chunk.len() > FORM_LIMIT {
            return Err(PortalError::BadForm(lang));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

/// A form posted by a signed-in browser whose `csrf` field is the session's token; any other is
/// refused (403) before the form is decoded further.
pub struct CsrfForm<T>(pub SignedIn, pub T);

impl<T: DeserializeOwned + 'static> FromRequest for CsrfForm<T> {
    type Error = PortalError;
    type Future = Pin<Box<dyn Future<Output = Result<CsrfForm<T>, PortalError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let req = req.clone();
        let payload = payload.take();
        Box::pin(async move {
            let signed_in = resolve(req).await?;
            let lang = signed_in.lang;
            let body = read_form(payload, lang).await?;
            let field: CsrfField =
                serde_urlencoded::from_bytes(&body).map_err(|_| PortalError::CsrfRefused(lang))?;
            if !same_secret(&field.csrf, &signed_in.csrf) {
                return Err(PortalError::CsrfRefused(lang));
            }
            let form =
                serde_urlencoded::from_bytes(&body).map_err(|_| PortalError::BadForm(lang))?;
            Ok(CsrfForm(signed_in, form))
        })
    }
}

/// The sign-in form, taken only when its `csrf` field matches the browser's [`SIGN_IN_COOKIE`]
/// (a page of another site can set neither).
pub struct SignInForm<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for SignInForm<T> {
    type Error = PortalError;
    type Future = Pin<Box<dyn Future<Output = Result<SignInForm<T>, PortalError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let lang = Lang::of(req);
        let cookie = req.cookie(SIGN_IN_COOKIE).map(|c| c.value().to_string());
        let payload = payload.take();
        Box::pin(async move {
            let body = read_form(payload, lang).await?;
            let field: CsrfField =
                serde_urlencoded::from_bytes(&body).map_err(|_| PortalError::CsrfRefused(lang))?;
            match cookie {
                Some(c) if !c.is_empty() && same_secret(&c, &field.csrf) => {}
                _ => return Err(PortalError::CsrfRefused(lang)),
            }
            let form =
                serde_urlencoded::from_bytes(&body).map_err(|_| PortalError::BadForm(lang))?;
            Ok(SignInForm(form))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert!(!same_secret("", "a"));
    }
}
