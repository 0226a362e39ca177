//! LXD's one response envelope (`sync`, `async`, `error`) with `metadata` kept as raw JSON until
//! the caller decodes it, and the operation object async calls point to.

use serde::Deserialize;
use serde_json::Value;

/// Failures talking to LXD. LXD's own message is carried verbatim.
#[derive(Debug, thiserror::Error)]
pub enum LxdError {
    /// cannot reach LXD at {socket}: {message}
    #[error("cannot reach LXD at {socket}: {message}")]
    Unreachable { socket: String, message: String },
    /// LXD refused {what}: {message}
    #[error("LXD refused {what} (HTTP {status}): {message}")]
    Api {
        what: String,
        status: u16,
        message: String,
    },
    /// LXD operation failed
    #[error("LXD operation for {what} failed: {message}")]
    Operation { what: String, message: String },
    /// LXD operation timed out
    #[error("LXD operation for {what} did not finish within {seconds}s")]
    Timeout { what: String, seconds: u64 },
    /// unexpected answer from LXD
    #[error("unexpected answer from LXD for {what}: {detail}")]
    Decode { what: String, detail: String },
}

impl LxdError {
    /// True when LXD said the object does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, LxdError::Api { status: 404, .. })
    }

    /// LXD's own message, where it gave one.
    pub fn lxd_message(&self) -> Option<&str> {
        match self {
            LxdError::Api { message, .. } | LxdError::Operation { message, .. } => Some(message),
            _ => None,
        }
    }
}

/// `{"type": "sync"|"async"|"error", ...}` as LXD sends it (`shared/api/response.go`).
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub error: String,
    #[serde(default)]
    pub error_code: u16,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub metadata: Value,
}

/// The operation object (`shared/api/operation.go`); finished once `status_code >= 200`.
#[derive(Debug, Deserialize)]
pub struct Operation {
    #[serde(default)]
    pub id: String,
    pub status_code: u16,
    #[serde(default)]
    pub err: String,
    #[serde(default)]
    pub metadata: Value,
}

/// What one call answered: a result now, or an operation to wait for.
pub(crate) enum Answer {
    Sync(Value),
    /// The operation's URL and the operation object LXD answered with.
    Async {
        operation: String,
        metadata: Value,
    },
}

impl Envelope {
    pub fn into_answer(self, what: &str, http_status: u16) -> Result<Answer, LxdError> {
        match self.kind.as_str() {
            "sync" => Ok(Answer::Sync(self.metadata)),
            "async" => Ok(Answer::Async {
                operation: self.operation,
                metadata: self.metadata,
            }),
            "error" => Err(LxdError::Api {
                what: what.to_string(),
                status: if self.error_code != 0 {
                    self.error_code
                } else {
                    http_status
                },
                message: self.error,
            }),
            other => Err(LxdError::Decode {
                what: what.to_string(),
                detail: format!("response type {other:?}"),
            }),
        }
    }
}
