//! `/healthz`, `/metrics` (with the metrics token or an admin's) and `/api/v1/openapi.json`.

use actix_web::{web, HttpResponse};

use crate::accounts::auth::Bearer;
use crate::app::state::Controller;
use crate::error::ActionError;

/// Healthy (200) when the database answers and every background loop is alive and ticking;
/// 503 naming the loop otherwise. The body shows each loop's last tick and the clock skew.
pub async fn healthz(ctl: web::Data<Controller>) -> Result<HttpResponse, ActionError> {
    let health = crate::app::health::check(&ctl).await?;
    Ok(if health.healthy() {
        HttpResponse::Ok().json(health)
    } else {
        HttpResponse::ServiceUnavailable().json(health)
    })
}

pub async fn metrics(
    ctl: web::Data<Controller>,
    bearer: Bearer,
) -> Result<HttpResponse, ActionError> {
    Ok(HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(crate::app::metrics_access::scrape(&ctl, bearer).await?))
}

pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok().json(crate::http::openapi::document())
}
