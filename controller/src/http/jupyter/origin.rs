//! Each container's JupyterLab on an origin of its own: `https://<container>.<notebook domain>`,
//! served by the portal's listener but sharing nothing with the portal. What a container serves
//! is the business of whoever is root in it (its student, its course's instructor), so:
//! - the portal's cookies are host-only on the portal's host and never sent here, and a page
//!   here cannot read the portal's answers (another origin) nor another container's (another
//!   host, so another origin too);
//! - the only credential here is the pass cookie, for this container alone, traded once for the
//!   ticket the portal's entry ([`super::entry`]) put in its redirect, and ended with the portal
//!   session it came from;
//! - a request that changes anything, and every websocket, must come from this origin itself
//!   (its `Origin`), so one container's page cannot drive another's JupyterLab in the same
//!   browser;
//! - the container's cookies never reach the browser and the browser's never reach the
//!   container.
//!
//! On a notebook host only `/_cohort/enter`, `/jupyter/<this container>/...` and the reclaim
//! banner's two paths (`super::banner`) answer.

use actix_web::cookie::{Cookie, SameSite};
use actix_web::dev::RequestHead;
use actix_web::guard::{Guard, GuardContext};
use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse};
use chrono::Utc;
use serde::Deserialize;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::instances::notebook;

/// Where a ticket is traded for the pass cookie.
pub const ENTER_PATH: &str = "/_cohort/enter";
/// The pass cookie: `__Host-` so that no other host (a sibling notebook, a parent domain) can
/// set or shadow it.
pub const PASS_COOKIE: &str = "__Host-cohort_notebook";

/// The container a request's host names, when the host is under the notebook domain: exactly
/// one label before `.<domain>`, an instance name's characters only.
pub fn instance_of_host(host: &str, domain: &str) -> Option<String> {
    let host = host.trim().to_ascii_lowercase();
    // Without a port (no IPv6 literal can be a notebook host).
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h.to_string(),
        _ => host,
    };
    let label = host.strip_suffix(domain)?.strip_suffix('.')?;
    let ok = !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    ok.then(|| label.to_string())
}

/// The host a request was sent to (`Host`, or the URI's authority over HTTP/2).
fn host_of(head: &RequestHead) -> Option<&str> {
    head.headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| head.uri.authority().map(|a| a.as_str()))
}

/// Matches the requests sent to a notebook's host, which [`serve`] answers and nothing else.
pub struct NotebookHost(pub String);

impl Guard for NotebookHost {
    fn check(&self, ctx: &GuardContext<'_>) -> bool {
        host_of(ctx.head()).is_some_and(|h| instance_of_host(h, &self.0).is_some())
    }
}

fn plain(status: actix_web::http::StatusCode, text: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/plain; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(text)
}

/// Every request to a notebook's host.
pub async fn serve(
    req: HttpRequest,
    payload: web::Payload,
    ctl: web::Data<Controller>,
) -> Result<HttpResponse, ActionError> {
    let domain = &ctl.config.server.notebook_domain;
    let Some(name) = host_of(req.head()).and_then(|h| instance_of_host(h, domain)) else {
        return Err(ActionError::NotFound(req.path().to_string()));
    };
    if req.path() == ENTER_PATH {
        return enter(&req, &ctl, &name).await;
    }
    if req.path() == super::banner::SCRIPT_PATH {
        return Ok(super::banner::script());
    }
    let warnings = req.path() == super::banner::WARNINGS_PATH;
    if !warnings && !req.path().starts_with(&format!("/jupyter/{name}/")) {
        return Ok(plain(
            actix_web::http::StatusCode::NOT_FOUND,
            format!("this origin serves {name}'s JupyterLab only"),
        ));
    }
    let Some(secret) = req.cookie(PASS_COOKIE).map(|c| c.value().to_string()) else {
        return Ok(no_pass(&req, &ctl, &name));
    };
    let hash = crate::accounts::auth::sha256(&secret);
    let holder = {
        let name = name.clone();
        notebook::pass_holder(&ctl, hash, name).await?
    };
    let Some(holder) = holder else {
        return Ok(no_pass(&req, &ctl, &name));
    };
    if let Some(refusal) = cross_origin(&req) {
        return Ok(refusal);
    }
    if warnings {
        // Answered here, with the pass's holder: the container is not asked.
        let caller = Caller::new(holder);
        notebook::authorize(&ctl, caller.clone(), name.clone()).await?;
        let pending = crate::reclaim::warning::pending_for(&ctl, caller, name.clone()).await?;
        let page = format!("{}/containers/{name}", ctl.config.public_url());
        return Ok(super::banner::answer(
            crate::http::portal::i18n::Lang::of(&req),
            page,
            &pending,
        ));
    }
    let granted = notebook::authorize(&ctl, Caller::new(holder), name.clone()).await?;
    super::proxy::relay(req, payload, &name, granted).await
}

/// A request without a live pass: a page is sent the portal's way in (which signs in first
/// where it must, and comes back with a ticket); anything else is refused.
fn no_pass(req: &HttpRequest, ctl: &Controller, name: &str) -> HttpResponse {
    let navigates = req
        .headers()
        .get("sec-fetch-mode")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|m| m == "navigate");
    if req.method() == Method::GET && navigates && !super::proxy::is_websocket(req) {
        let back = req
            .uri()
            .path_and_query()
            .map_or(req.path(), |p| p.as_str())
            .to_string();
        return HttpResponse::SeeOther()
            .insert_header((
                header::LOCATION,
                format!("{}{back}", ctl.config.public_url()),
            ))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish();
    }
    plain(
        actix_web::http::StatusCode::UNAUTHORIZED,
        format!("no pass for {name}'s JupyterLab: open it from the portal"),
    )
}

/// A refusal for a request that may change something (any method but GET, HEAD and OPTIONS,
/// and every websocket) whose `Origin` is not this very origin.
fn cross_origin(req: &HttpRequest) -> Option<HttpResponse> {
    let safe = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if safe && !super::proxy::is_websocket(req) {
        return None;
    }
    let own = host_of(req.head()).map(|h| format!("https://{}", h.to_ascii_lowercase()));
    let origin = req
        .headers()
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .map(str::to_ascii_lowercase);
    match (own, origin) {
        (Some(own), Some(origin)) if own == origin => None,
        (_, origin) => Some(plain(
            actix_web::http::StatusCode::FORBIDDEN,
            format!(
                "refused: a change to this notebook must come from its own page, not from {}",
                origin.unwrap_or_else(|| "a request without an Origin".into())
            ),
        )),
    }
}

#[derive(Deserialize)]
struct Enter {
    ticket: String,
    next: String,
}

/// Trades a ticket for the pass cookie and goes on to the notebook's page.
async fn enter(
    req: &HttpRequest,
    ctl: &Controller,
    name: &str,
) -> Result<HttpResponse, ActionError> {
    let Ok(query) = web::Query::<Enter>::from_query(req.query_string()) else {
        return Err(ActionError::invalid(
            "ticket",
            "a ticket and where to go next",
        ));
    };
    let next = query.next.clone();
    let within = next.starts_with(&format!("/jupyter/{name}/"))
        && !next.contains("//")
        && !next.chars().any(|c| c == '\\' || c.is_control());
    if !within {
        return Err(ActionError::invalid(
            "next",
            format!("not a page of {name}'s JupyterLab"),
        ));
    }
    let hash = crate::accounts::auth::sha256(&query.ticket);
    let pass = crate::accounts::auth::new_secret();
    let pass_hash = crate::accounts::auth::sha256(&pass);
    let lifetime = chrono::Duration::minutes(i64::from(ctl.config.auth.session_minutes));
    let instance = name.to_string();
    let taken =
        notebook::trade_ticket(ctl, hash, instance, pass_hash, Utc::now() + lifetime).await?;
    if !taken {
        return Ok(plain(
            actix_web::http::StatusCode::FORBIDDEN,
            format!(
                "this way into {name}'s JupyterLab was used already or has expired: open it \
                 again from the portal ({})",
                ctl.config.public_url()
            ),
        ));
    }
    let cookie = Cookie::build(PASS_COOKIE, pass)
        .path("/")
        .secure(true)
        .http_only(true)
        // Lax: the pass must go with the first page after the portal's redirect, which
        // another site (the portal's origin) started; a change always needs this origin's
        // own `Origin` besides.
        .same_site(SameSite::Lax)
        .finish();
    Ok(HttpResponse::SeeOther()
        .cookie(cookie)
        .insert_header((header::LOCATION, next))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .finish())
}

#[cfg(test)]
mod tests {
    use super::instance_of_host;

    #[test]
    fn only_one_label_under_the_domain_names_a_container() {
        let d = "notebooks.localhost";
        assert_eq!(
            instance_of_host("nb1-ann.notebooks.localhost:8443", d).as_deref(),
            Some("nb1-ann")
        );
        assert_eq!(
            instance_of_host("NB1-Ann.Notebooks.Localhost", d).as_deref(),
            Some("nb1-ann")
        );
        assert_eq!(instance_of_host("notebooks.localhost:8443", d), None);
        assert_eq!(instance_of_host("a.b.notebooks.localhost", d), None);
        assert_eq!(instance_of_host("evilnotebooks.localhost", d), None);
        assert_eq!(instance_of_host("127.0.0.1:8443", d), None);
        assert_eq!(instance_of_host("a_b.notebooks.localhost", d), None);
    }
}
