//! Non-interactive exec through LXD's `record-output`: the command runs to completion, its
//! stdout and stderr are read back from the instance's exec logs and its exit code from the
//! operation. Stdin, when given, is pushed as a file the command reads and that is removed at once.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use cohort_proto::agent::{ExecRequest, ExecResult};
use hyper::Method;
use serde::Deserialize;
use serde_json::json;

use super::InstanceError;
use crate::lxd::LxdError;
use crate::node::Node;

/// Default and largest command timeouts.
const DEFAULT_TIMEOUT_S: u32 = 300;
const MAX_TIMEOUT_S: u32 = 3600;

/// Opens the pushed stdin file, removes it, then runs the command with it as stdin.
const WITH_STDIN: &str = r#"exec 0<"$1"; rm -f "$1"; shift; exec "$@""#;

/// What a command left behind.
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: Bytes,
    pub stderr: Bytes,
}

#[derive(Debug, Deserialize)]
struct ExecMetadata {
    #[serde(rename = "return", default)]
    exit_code: i32,
    #[serde(default)]
    output: std::collections::BTreeMap<String, String>,
}

impl Node {
    /// Runs `argv` as root with no stdin; bounded by `timeout`.
    pub(crate) async fn run_command(
        &self,
        name: &str,
        argv: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, InstanceError> {
        let body = json!({
            "command": argv,
            "environment": {},
            "interactive": false,
            "wait-for-websocket": false,
            "record-output": true,
        });
        self.exec_body(name, body, timeout).await
    }

    pub(super) async fn exec_body(
        &self,
        name: &str,
        body: serde_json::Value,
        timeout: Duration,
    ) -> Result<ExecOutput, InstanceError> {
        let path = format!("{}/exec", super::path(name));
        let meta = match self
            .lxd
            .call_within(Method::POST, &path, Some(&body), timeout)
            .await
        {
            Ok(m) => m,
            Err(LxdError::Timeout { .. }) => {
                return Err(InstanceError::ExecTimeout {
                    instance: name.to_string(),
                    seconds: timeout.as_secs(),
                })
            }
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        let meta: ExecMetadata = serde_json::from_value(meta).map_err(|e| LxdError::Decode {
            what: format!("exec in {name}"),
            detail: e.to_string(),
        })?;
        let read = |fd: &str| {
            let log = meta.output.get(fd).cloned();
            async move {
                match log {
                    Some(p) => self.lxd.get_raw(&p).await.map(|f| f.bytes),
                    None => Ok(Bytes::new()),
                }
            }
        };
        let stdout = read("1").await?;
        let stderr = read("2").await?;
        Ok(ExecOutput {
            exit_code: meta.exit_code,
            stdout,
            stderr,
        })
    }

    /// `POST /v1/instances/{name}/exec`.
    pub async fn exec(&self, name: &str, req: &ExecRequest) -> Result<ExecResult, InstanceError> {
        super::check_name(name)?;
        if req.command.is_empty() || req.command[0].is_empty() {
            return Err(InstanceError::invalid("command", "must name a program"));
        }
        let seconds = req.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if seconds == 0 || seconds > MAX_TIMEOUT_S {
            return Err(InstanceError::invalid(
                "timeout_s",
                format!("must be 1-{MAX_TIMEOUT_S}"),
            ));
        }
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut command = req.command.clone();
        if let Some(stdin) = &req.stdin_base64 {
            let bytes = b64
                .decode(stdin)
                .map_err(|e| InstanceError::invalid("stdin_base64", e.to_string()))?;
            let file = format!("/tmp/.cohort-stdin-{}", uuid::Uuid::new_v4());
            self.push_file(name, &file, Bytes::from(bytes), 0o600, 0, 0)
                .await?;
            let mut wrapped = vec![
                "/bin/sh".to_string(),
                "-c".into(),
                WITH_STDIN.into(),
                "cohort-exec".into(),
                file,
            ];
            wrapped.append(&mut command);
            command = wrapped;
        }
        let mut body = json!({
            "command": command,
            "environment": req.environment,
            "interactive": false,
            "wait-for-websocket": false,
            "record-output": true,
        });
        if let Some(u) = req.user {
            body["user"] = u.into();
        }
        if let Some(g) = req.group {
            body["group"] = g.into();
        }
        if let Some(cwd) = &req.cwd {
            body["cwd"] = cwd.clone().into();
        }
        let out = self
            .exec_body(name, body, Duration::from_secs(seconds.into()))
            .await?;
        Ok(ExecResult {
            exit_code: out.exit_code,
            stdout_base64: b64.encode(&out.stdout),
            stderr_base64: b64.encode(&out.stderr),
        })
    }
}
