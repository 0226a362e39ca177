//! `/1.0/operations`: an async call's operation waited for with
//! `/1.0/operations/{id}/wait?timeout=N` under a client-side deadline, finished once its status
//! code is >= 200 (`client/operations.go`, `shared/api/operation.go`).

use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use serde_json::Value;

use super::client::encode;
use super::envelope::Answer;
pub use super::envelope::Operation;
use super::{Lxd, LxdError};

/// Longest single `/wait` request; the overall deadline is the caller's.
const WAIT_SLICE_S: u64 = 30;

/// Whether a `/wait` error says only that the wait's own timeout passed.
fn slice_ran_out(message: &str) -> bool {
    message.contains("context deadline exceeded")
}

/// `/1.0/operations/{id}`, the id path-escaped.
pub(super) fn operation_url(id: &str) -> String {
    format!("/1.0/operations/{}", encode(id))
}

impl Lxd {
    /// Waits for an operation (`/1.0/operations/{id}`) until it finishes or `timeout` passes.
    pub(super) async fn wait(
        &self,
        operation: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<Value, LxdError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LxdError::Timeout {
                    what: what.to_string(),
                    seconds: timeout.as_secs(),
                });
            }
            let slice = left.as_secs().clamp(1, WAIT_SLICE_S);
            let path = format!("{operation}/wait?timeout={slice}");
            let fut = self.answer(Method::GET, &path, &[], Bytes::new());
            let answered = tokio::time::timeout(left + Duration::from_secs(2), fut)
                .await
                .map_err(|_| LxdError::Timeout {
                    what: what.to_string(),
                    seconds: timeout.as_secs(),
                })?;
            let answer = match answered {
                // Incus answers a `/wait` whose own timeout passed with the operation still
                // running as an error ("context deadline exceeded"), where LXD answers the
                // running operation: both mean "not yet", never the operation's failure.
                Err(LxdError::Api { ref message, .. }) if slice_ran_out(message) => continue,
                other => other?,
            };
            let Answer::Sync(meta) = answer else {
                return Err(LxdError::Decode {
                    what: what.to_string(),
                    detail: "operation wait answered async".into(),
                });
            };
            let op: Operation = serde_json::from_value(meta).map_err(|e| LxdError::Decode {
                what: what.to_string(),
                detail: e.to_string(),
            })?;
            if op.status_code >= 400 {
                return Err(LxdError::Operation {
                    what: what.to_string(),
                    message: if op.err.is_empty() {
                        format!("operation {} ended with status {}", op.id, op.status_code)
                    } else {
                        op.err
                    },
                });
            }
            if op.status_code >= 200 {
                return Ok(op.metadata);
            }
        }
    }

    /// Waits for the operation at URL `operation` (as LXD answered it) until it finishes or
    /// `timeout` passes (`LxdError::Timeout`, the operation still running).
    pub async fn wait_for(
        &self,
        operation: &str,
        what: &str,
        timeout: Duration,
    ) -> Result<Value, LxdError> {
        self.wait(operation, what, timeout).await
    }

    /// The URL of a running operation of the project that creates instance `name`, if any:
    /// found again after the agent restarted, where it no longer knows what it started.
    pub async fn running_create_of(&self, name: &str) -> Result<Option<String>, LxdError> {
        let listed = self.get("/1.0/operations?recursion=1").await?;
        let instance = format!("/1.0/instances/{}", encode(name));
        let running = listed.get("running").and_then(Value::as_array);
        Ok(running.into_iter().flatten().find_map(|op| {
            let creating = op["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("Creating"));
            let names_it = op["resources"]["instances"].as_array().is_some_and(|r| {
                r.iter().any(|u| {
                    u.as_str().is_some_and(|u| {
                        u.starts_with(&instance)
                            && u[instance.len()..].chars().next().is_none_or(|c| c == '?')
                    })
                })
            });
            let id = op["id"].as_str()?;
            (creating && names_it).then(|| operation_url(id))
        }))
    }

    /// `GET /1.0/operations/{id}/wait?timeout=N`: the operation once it has finished or
    /// `timeout_s` seconds have passed, whichever is first.
    pub async fn wait_operation(&self, id: &str, timeout_s: u32) -> Result<Operation, LxdError> {
        let path = format!("{}/wait?timeout={timeout_s}", operation_url(id));
        self.get_as(&path).await
    }
}
