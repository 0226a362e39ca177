//! The one mapping from [`ActionError`] to an HTTP status and the one JSON error shape.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use cohort_proto::{ErrorBody, ErrorDetail};

use crate::agent_client::AgentError;
use crate::error::ActionError;

/// The answer for an error: status, stable code and the field at fault.
pub fn classify(err: &ActionError) -> (StatusCode, &str, Option<&str>) {
    match err {
        ActionError::Invalid { field, .. } => {
            (StatusCode::BAD_REQUEST, "invalid_field", Some(field))
        }
        ActionError::TooLarge { field, .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large", Some(field))
        }
        ActionError::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "unauthenticated", None),
        ActionError::Throttled { .. } => (StatusCode::TOO_MANY_REQUESTS, "throttled", None),
        ActionError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", None),
        ActionError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found", None),
        ActionError::Missing { field, .. } => (StatusCode::NOT_FOUND, "not_found", Some(field)),
        ActionError::Conflict { field, .. } => (StatusCode::CONFLICT, "conflict", field.as_deref()),
        ActionError::NoCapacity(_) => (StatusCode::CONFLICT, "no_capacity", None),
        ActionError::Agent {
            source:
                AgentError::Status {
                    status,
                    code,
                    field,
                    ..
                },
            ..
        } if (400..500).contains(status) => (
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            code,
            field.as_deref(),
        ),
        // The command ran out of its own time (the agent killed it): the caller's timeout.
        ActionError::Agent {
            source: AgentError::Status { status: 504, .. },
            ..
        } => (StatusCode::GATEWAY_TIMEOUT, "timeout", None),
        ActionError::Agent {
            source: AgentError::Offline(_),
            ..
        } => (StatusCode::SERVICE_UNAVAILABLE, "node_offline", None),
        ActionError::Agent { .. } => (StatusCode::BAD_GATEWAY, "agent_error", None),
        ActionError::Pool(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            None,
        ),
        ActionError::Directory(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "directory_unavailable",
            None,
        ),
        ActionError::Database(_) if err.database_unavailable().is_some() => (
            StatusCode::SERVICE_UNAVAILABLE,
            "database_unavailable",
            None,
        ),
        ActionError::Database(_)
        | ActionError::Pki(_)
        | ActionError::Internal(_)
        | ActionError::Io(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal_error", None),
    }
}

pub fn body(code: &str, message: String, field: Option<&str>) -> ErrorBody {
    ErrorBody {
        error: ErrorDetail {
            code: code.to_string(),
            message,
            field: field.map(String::from),
        },
    }
}

impl ResponseError for ActionError {
    fn status_code(&self) -> StatusCode {
        classify(self).0
    }

    fn error_response(&self) -> HttpResponse {
        let (status, code, field) = classify(self);
        if status.is_server_error() {
            tracing::error!(error = %self, "request failed");
        }
        let mut response = HttpResponse::build(status);
        if let ActionError::Throttled { retry_after_s } = self {
            response.insert_header((
                actix_web::http::header::RETRY_AFTER,
                retry_after_s.to_string(),
            ));
        }
        let message = match self.database_unavailable() {
            Some(why) => format!("{why} ({self})"),
            None => self.to_string(),
        };
        response.json(body(code, message, field))
    }
}
