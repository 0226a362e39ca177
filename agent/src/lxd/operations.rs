//! `/1.0/operations`: an async call's operation waited for with
//! `/1.0/operations/{id}/wait?timeout=N` under a client-side deadline, finished once its status
//! code is >= 200 (`client/operations.go`, `shared/api/operation.go`).
//!
//! The daemons answer a `/wait` differently. LXD 5.0 renders the operation, running or ended.
//! Incus 6.0 answers an error instead in two cases: the wait's own timeout passed ("context
//! deadline exceeded"), or the operation failed (its own error, which can end the same way: a
//! clean stop that ran out of time is "Failed shutting down instance, status is "Running":
//! context deadline exceeded"). So an error from `/wait` is never read from its words: the
//! operation itself is asked whether it is still running. Both daemons forget an operation 5 s
//! after it ends; a wait that comes later gets the daemon's 404, which the create's retry reads
//! as "finished a while ago".

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
            let op = match answered {
                Ok(Answer::Sync(meta)) => {
                    serde_json::from_value(meta).map_err(|e| LxdError::Decode {
                        what: what.to_string(),
                        detail: e.to_string(),
                    })?
                }
                Ok(Answer::Async { .. }) => {
                    return Err(LxdError::Decode {
                        what: what.to_string(),
                        detail: "operation wait answered async".into(),
                    })
                }
                Err(waited @ LxdError::Api { .. }) => {
                    match self.operation_now(operation, what).await {
                        Ok(op) if op.status_code < 200 => continue,
                        // Incus's answer for a failed operation is the operation's own error,
                        // with the status that error maps to: kept as the daemon gave it.
                        Ok(op)
                            if op.status_code >= 400 && waited.lxd_message() == Some(&op.err) =>
                        {
                            return Err(waited)
                        }
                        Ok(op) => op,
                        // Forgotten (it ended more than 5 s ago): the daemon's own 404, which
                        // a create's retry reads as "finished; look up what it left".
                        Err(gone) if gone.is_not_found() => return Err(waited),
                        Err(other) => return Err(other),
                    }
                }
                Err(other) => return Err(other),
            };
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

    /// The operation at URL `operation` as it is now, without waiting.
    async fn operation_now(&self, operation: &str, what: &str) -> Result<Operation, LxdError> {
        match self
            .answer(Method::GET, operation, &[], Bytes::new())
            .await?
        {
            Answer::Sync(meta) => serde_json::from_value(meta).map_err(|e| LxdError::Decode {
                what: what.to_string(),
                detail: e.to_string(),
            }),
            Answer::Async { .. } => Err(LxdError::Decode {
                what: what.to_string(),
                detail: "operation answered async".into(),
            }),
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
    /// Incus's error answers (its wait's timeout, the operation's failure) are read from the
    /// operation itself, as in `wait`.
    pub async fn wait_operation(&self, id: &str, timeout_s: u32) -> Result<Operation, LxdError> {
        let url = operation_url(id);
        match self
            .get_as(&format!("{url}/wait?timeout={timeout_s}"))
            .await
        {
            Err(LxdError::Api { .. }) => self.operation_now(&url, &url).await,
            answered => answered,
        }
    }
}
