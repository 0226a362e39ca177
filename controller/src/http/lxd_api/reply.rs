//! LXD's response envelope: `sync` answers with `metadata`, `async` ones naming an operation,
//! and `error` ones whose `error_code` is the HTTP status, as the `lxc` client decodes them.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use serde::Serialize;
use serde_json::{json, Value};

use crate::error::ActionError;

/// A `sync` answer (200) with `metadata`.
pub fn sync(metadata: impl Serialize) -> HttpResponse {
    HttpResponse::Ok().json(json!({
        "type": "sync",
        "status": "Success",
        "status_code": 200,
        "operation": "",
        "error_code": 0,
        "error": "",
        "metadata": metadata,
    }))
}

/// An error as LXD words it; built from an action's error, whose status it keeps (an unknown
/// certificate is a 403, as LXD answers untrusted clients), or from something Cohort does not
/// offer (501).
#[derive(Debug, thiserror::Error)]
pub enum LxdError {
    #[error("{0}")]
    Action(#[from] ActionError),
    /// something LXD has that Cohort does not offer (VMs, profiles, networks)
    #[error("Not supported by Cohort: {0}")]
    NotSupported(String),
    /// a request LXD would refuse as malformed
    #[error("{0}")]
    BadRequest(String),
}

impl LxdError {
    pub fn not_supported(what: impl Into<String>) -> Self {
        LxdError::NotSupported(what.into())
    }
}

impl ResponseError for LxdError {
    fn status_code(&self) -> StatusCode {
        match self {
            LxdError::Action(ActionError::Unauthenticated(_)) => StatusCode::FORBIDDEN,
            LxdError::Action(e) => e.status_code(),
            LxdError::NotSupported(_) => StatusCode::NOT_IMPLEMENTED,
            LxdError::BadRequest(_) => StatusCode::BAD_REQUEST,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        if status.is_server_error() && !matches!(self, LxdError::NotSupported(_)) {
            tracing::error!(error = %self, "LXD-style request failed");
        }
        let message = match self {
            // LXD's own words for a client it does not trust.
            LxdError::Action(ActionError::Unauthenticated(_)) => "Forbidden".to_string(),
            other => other.to_string(),
        };
        HttpResponse::build(status).json(error_body(status, &message))
    }
}

pub fn error_body(status: StatusCode, message: &str) -> Value {
    json!({
        "type": "error",
        "status": "",
        "status_code": 0,
        "operation": "",
        "error_code": status.as_u16(),
        "error": message,
        "metadata": null,
    })
}

pub type LxdReply = Result<HttpResponse, LxdError>;
