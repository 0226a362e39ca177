//! The middleware in front of every authenticated route: a source address that failed to
//! authenticate too often is answered 429 with `Retry-After` before anything else is read
//! ([`crate::accounts::auth_failures`]); every failed authentication (a 401, whatever the route or
//! credential: bearer token, join secret) is counted and audited as `failed_sign_in` (a flood
//! past the minute's cap summed up in one row: [`crate::accounts::failure_audit`]).
//!
//! The source is the TCP peer, never a forwarded-for header a client could write: behind a
//! reverse proxy every caller is the proxy's address.

use std::time::Instant;

use actix_web::body::BoxBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::middleware::Next;
use actix_web::web;
use serde_json::json;

use crate::app::state::Controller;
use crate::error::ActionError;

pub async fn throttle(
    req: ServiceRequest,
    next: Next<BoxBody>,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let ctl = req.app_data::<web::Data<Controller>>().cloned();
    let source = req.peer_addr().map(|a| a.ip());
    let (Some(ctl), Some(source)) = (ctl, source) else {
        return next.call(req).await;
    };
    if let Some(wait) = ctl.auth_failures.blocked(&source, Instant::now()) {
        let retry_after_s = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return Ok(req.error_response(ActionError::Throttled { retry_after_s }));
    }
    let (method, path) = (req.method().to_string(), req.path().to_string());
    let res = next.call(req).await?;
    if res.status() == StatusCode::UNAUTHORIZED {
        ctl.auth_failures.record(source, Instant::now());
        let reason = res
            .response()
            .error()
            .map(ToString::to_string)
            .unwrap_or_default();
        let what = format!("{method} {path}");
        let detail = json!({"method": method, "path": path, "reason": reason});
        let source = source.to_string();
        let recorded = crate::accounts::sign_in::audit_failed(&ctl, source, &what, detail).await;
        if let Err(error) = recorded {
            tracing::warn!(%error, "auditing a failed sign-in failed");
        }
    }
    Ok(res)
}
