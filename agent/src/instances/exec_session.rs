//! Exec sessions relayed to a far client (the real `lxc exec`, pylxd): the command is started
//! in LXD with `wait-for-websocket`, its websockets are handed through as the controller
//! attaches them, and its end is read from the operation. Only operations started here can be
//! attached to or waited on, so the controller's relay reaches nothing else of LXD's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use cohort_proto::agent::{ExecSession, ExecSessionRequest, ExecSessionState};
use cohort_proto::validate;

use super::InstanceError;
use super::Instances;
use crate::lxd::instance_exec::InstanceExecPost;
use crate::lxd::{LxdError, OperationSocket};

/// Most sessions open at once on a node, and longest one is remembered.
const MAX_SESSIONS: usize = 256;
const SESSION_LIFE: Duration = Duration::from_secs(12 * 3600);
/// Longest one state request waits for the end (the controller asks again).
const MAX_WAIT_S: u32 = 30;
/// A terminal larger than this is no terminal.
const MAX_TERMINAL: u32 = 10_000;

/// The LXD operations of the sessions started here, with when each began.
#[derive(Default)]
pub struct ExecSessions(Mutex<HashMap<String, Instant>>);

impl ExecSessions {
    fn add(&self, id: &str) -> Result<(), InstanceError> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, started| started.elapsed() < SESSION_LIFE);
        if open.len() >= MAX_SESSIONS {
            return Err(InstanceError::Conflict(format!(
                "{MAX_SESSIONS} exec sessions are open on this node already"
            )));
        }
        open.insert(id.to_string(), Instant::now());
        Ok(())
    }

    fn check(&self, id: &str) -> Result<(), InstanceError> {
        let open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if open.contains_key(id) {
            Ok(())
        } else {
            Err(InstanceError::NotFound {
                field: Some("operation".into()),
                message: format!("no exec session {id} on this node"),
            })
        }
    }

    fn forget(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

impl Instances {
    /// Starts `req` in `name`; answers the operation and its websocket secrets.
    pub async fn start_exec_session(
        &self,
        name: &str,
        req: &ExecSessionRequest,
    ) -> Result<ExecSession, InstanceError> {
        super::check_name(name)?;
        validate::exec_request(&req.command, &req.environment, req.cwd.as_deref())
            .map_err(|e| InstanceError::invalid(e.field, e.message))?;
        for (field, size) in [("width", req.width), ("height", req.height)] {
            if size > MAX_TERMINAL {
                return Err(InstanceError::invalid(
                    field,
                    format!("must be at most {MAX_TERMINAL}"),
                ));
            }
        }
        let body = InstanceExecPost {
            command: req.command.clone(),
            environment: req.environment.clone(),
            interactive: req.interactive,
            wait_for_websocket: true,
            record_output: false,
            width: Some(req.width),
            height: Some(req.height),
            user: req.user,
            group: req.group,
            cwd: req.cwd.clone(),
        };
        let (id, op) = match self.lxd.exec_instance_session(name, &body).await {
            Ok(started) => started,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(LxdError::Api {
                status: 400,
                message,
                ..
            }) if message.contains("not running") => {
                return Err(InstanceError::Conflict(format!(
                    "{name} is not running (LXD: {message})"
                )))
            }
            Err(e) => return Err(e.into()),
        };
        let fds: BTreeMap<String, String> = op["metadata"]["fds"]
            .as_object()
            .map(|fds| {
                fds.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        self.exec_sessions.add(&id)?;
        Ok(ExecSession { operation: id, fds })
    }

    /// The session's state, waiting up to `timeout` seconds for its end.
    pub async fn exec_session_state(
        &self,
        id: &str,
        timeout: u32,
    ) -> Result<ExecSessionState, InstanceError> {
        self.exec_sessions.check(id)?;
        let op = match self.lxd.wait_operation(id, timeout.min(MAX_WAIT_S)).await {
            Ok(op) => op,
            // LXD forgets a finished operation after a few seconds.
            Err(e) if e.is_not_found() => {
                self.exec_sessions.forget(id);
                return Ok(ExecSessionState {
                    finished: true,
                    exit_code: None,
                    error: Some("the exec session ended and LXD no longer knows it".into()),
                });
            }
            Err(e) => return Err(e.into()),
        };
        let code = op.status_code;
        let finished = code >= 200;
        if finished {
            self.exec_sessions.forget(id);
        }
        let error = Some(op.err).filter(|e| !e.is_empty());
        let exit_code = op.metadata["return"]
            .as_i64()
            .and_then(|c| i32::try_from(c).ok());
        Ok(ExecSessionState {
            finished,
            exit_code,
            error: error.or_else(|| (code >= 400).then(|| format!("LXD status {code}"))),
        })
    }

    /// One of the session's websockets, upgraded with the far client's key.
    pub async fn exec_session_socket(
        &self,
        id: &str,
        secret: &str,
        key: &str,
        protocol: Option<&str>,
    ) -> Result<OperationSocket, InstanceError> {
        self.exec_sessions.check(id)?;
        Ok(self.lxd.operation_socket(id, secret, key, protocol).await?)
    }
}
