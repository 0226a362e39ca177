//! `/healthz`, `/metrics` (with the metrics token or an admin's) and `/api/v1/openapi.json`.

use actix_web::{web, HttpResponse};

use crate::accounts::auth::Bearer;
use crate::app::state::Controller;
use crate::error::ActionError;

/// Healthy when the database answers.
pub async fn healthz(ctl: web::Data<Controller>) -> Result<HttpResponse, ActionError> {
    crate::app::health::database_answers(&ctl).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ok"})))
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
