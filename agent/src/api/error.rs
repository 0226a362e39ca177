//! The one mapping from every library error to an HTTP status and the one JSON error shape.

use cohort_proto::{ErrorBody, ErrorDetail};
use hyper::StatusCode;

use crate::images::ImageError;
use crate::instances::InstanceError;
use crate::lxd::LxdError;
use crate::node::NodeError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        ApiError {
            field: Some(field.to_string()),
            ..Self::new(StatusCode::BAD_REQUEST, "invalid_field", message)
        }
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message.clone(),
                field: self.field.clone(),
            },
        }
    }
}

impl From<LxdError> for ApiError {
    fn from(e: LxdError) -> Self {
        let status = match &e {
            LxdError::Api { status: 404, .. } => StatusCode::NOT_FOUND,
            LxdError::Unreachable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            LxdError::Timeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            LxdError::Api { .. } | LxdError::Operation { .. } | LxdError::Decode { .. } => {
                StatusCode::BAD_GATEWAY
            }
        };
        let code = if status == StatusCode::NOT_FOUND {
            "not_found"
        } else {
            "lxd_error"
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// What the daemon refused of an interactive request (a path it will not write, a config value
/// it will not take, a snapshot that exists already or does not exist): the caller's to mend, a
/// 4xx naming `field` with the daemon's own words, never a failing node (502). Everything else
/// maps as usual. Only for requests a person makes and waits on: a worker's step keeps LXD's
/// answer, which it retries.
pub fn refused(field: &str, e: InstanceError) -> ApiError {
    let (status, message) = match e {
        InstanceError::Lxd(LxdError::Api {
            status, message, ..
        }) if matches!(status, 400 | 403 | 409) || message.starts_with("Invalid config") => {
            let status = match status {
                403 => StatusCode::FORBIDDEN,
                409 => StatusCode::CONFLICT,
                _ => StatusCode::BAD_REQUEST,
            };
            (status, message)
        }
        // An async call the daemon took, then failed (a duplicate snapshot, a missing one).
        InstanceError::Lxd(LxdError::Operation { message, .. }) => {
            let status = if message.contains("does not exist") {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::CONFLICT
            };
            (status, message)
        }
        other => return other.into(),
    };
    ApiError {
        field: Some(field.to_string()),
        ..ApiError::new(
            status,
            "refused",
            format!("the node's daemon refused it: {message}"),
        )
    }
}

/// A delete the daemon will not do while the instance is protected
/// (`security.protection.delete`, set by an admin with `lxc`): a 409 with the daemon's words,
/// which the controller's worker takes as final (an admin must lift the protection), where any
/// other refusal of a delete stays a 502 the worker tries again.
pub fn delete_refused(e: InstanceError) -> ApiError {
    match e {
        InstanceError::Lxd(
            LxdError::Api {
                status: 400 | 403,
                message,
                ..
            }
            | LxdError::Operation { message, .. },
        ) if message.to_lowercase().contains("is protected") => ApiError::new(
            StatusCode::CONFLICT,
            "protected",
            format!("the node's daemon refused the delete: {message}"),
        ),
        other => other.into(),
    }
}

impl From<InstanceError> for ApiError {
    fn from(e: InstanceError) -> Self {
        match e {
            InstanceError::Invalid { field, message } => ApiError::invalid(&field, message),
            InstanceError::NotFound { field, message } => ApiError {
                field,
                ..ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
            },
            InstanceError::TooLarge { field, size, limit } => {
                let message =
                    format!("{field} is {size} bytes, larger than the limit of {limit} bytes");
                ApiError {
                    field: Some(field),
                    ..ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
                }
            }
            InstanceError::Conflict(message) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", message)
            }
            e @ InstanceError::StillCreating { .. } => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "creating", e.to_string())
            }
            e @ (InstanceError::SshNotReady { .. } | InstanceError::ExecTimeout { .. }) => {
                ApiError::new(StatusCode::GATEWAY_TIMEOUT, "timeout", e.to_string())
            }
            InstanceError::Lxd(e) => e.into(),
            InstanceError::Network(crate::network::NetworkError::Lxd(e)) => e.into(),
            InstanceError::Network(e @ crate::network::NetworkError::Full(_)) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_capacity",
                e.to_string(),
            ),
            InstanceError::Network(e) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
            InstanceError::Internal(message) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
        }
    }
}

impl From<ImageError> for ApiError {
    fn from(e: ImageError) -> Self {
        match e {
            ImageError::Invalid { field, message } => ApiError::invalid(&field, message),
            e @ ImageError::Download { .. } => {
                ApiError::new(StatusCode::BAD_GATEWAY, "download_failed", e.to_string())
            }
            ImageError::Lxd(e) => e.into(),
        }
    }
}

impl From<NodeError> for ApiError {
    fn from(e: NodeError) -> Self {
        match e {
            NodeError::Lxd(e) => e.into(),
            e @ (NodeError::Server(_) | NodeError::Host(_) | NodeError::Network(_)) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
        }
    }
}

impl From<crate::identity::IdentityError> for ApiError {
    fn from(e: crate::identity::IdentityError) -> Self {
        use crate::identity::IdentityError as E;
        match e {
            E::KeyMismatch(_) | E::Tls(_) => ApiError::invalid("certificate_pem", e.to_string()),
            E::NotPending(_) => ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string()),
            E::Io { .. } | E::Crypto(_) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
            }
        }
    }
}
