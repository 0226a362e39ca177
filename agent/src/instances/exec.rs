//! Non-interactive exec through LXD's `record-output`: the command runs to completion, its
//! stdout and stderr are read back from the instance's exec logs (streamed on for a caller's
//! exec, within its limit) and its exit code from the operation. Stdin, when given, is pushed as
//! a file the command reads and that is removed at once.

use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use cohort_proto::agent::ExecRequest;
use cohort_proto::validate;

use super::InstanceError;
use super::Instances;
use crate::lxd::instance_exec::{ExecRecord as ExecMetadata, InstanceExecPost};
use crate::lxd::{LxdError, RawStream};

/// Default and largest command timeouts.
const DEFAULT_TIMEOUT_S: u32 = 300;
const MAX_TIMEOUT_S: u32 = 3600;

/// Opens the pushed stdin file, removes it, then runs the command with it as stdin.
const WITH_STDIN: &str = r#"exec 0<"$1"; rm -f "$1"; shift; exec "$@""#;

/// A command's exit code and its output logs, not read yet.
pub struct ExecStreams {
    pub exit_code: i32,
    pub stdout: Option<RawStream>,
    pub stderr: Option<RawStream>,
}

/// What an internal command left behind: its exit code and what it said went wrong.
pub struct ExecOutput {
    pub exit_code: i32,
    pub stderr: Bytes,
}

impl Instances {
    /// Runs `argv` as root with no stdin; bounded by `timeout`.
    pub(crate) async fn run_command(
        &self,
        name: &str,
        argv: Vec<String>,
        timeout: Duration,
    ) -> Result<ExecOutput, InstanceError> {
        let body = InstanceExecPost::recorded(argv, Default::default());
        self.exec_body(name, &body, timeout).await
    }

    /// Runs the exec `body` asks for; past `timeout`, the processes tagged `tag` in their
    /// environment (the command and its children) are killed before the timeout is answered.
    async fn run_exec(
        &self,
        name: &str,
        body: &InstanceExecPost,
        timeout: Duration,
        tag: Option<&str>,
    ) -> Result<ExecMetadata, InstanceError> {
        match self.lxd.exec_instance(name, body, timeout).await {
            Ok(m) => Ok(m),
            Err(LxdError::Timeout { .. }) => {
                if let Some(tag) = tag {
                    let killed = super::exec_tag::kill_tagged(tag).await;
                    tracing::info!(
                        instance = name,
                        killed,
                        "exec timed out; its processes killed"
                    );
                }
                Err(InstanceError::ExecTimeout {
                    instance: name.to_string(),
                    seconds: timeout.as_secs(),
                })
            }
            Err(e) if e.is_not_found() => Err(InstanceError::instance_missing(name, &e)),
            Err(e) => Err(e.into()),
        }
    }

    /// An internal command's exit code and stderr, read whole (Cohort's own commands say little).
    pub(super) async fn exec_body(
        &self,
        name: &str,
        body: &InstanceExecPost,
        timeout: Duration,
    ) -> Result<ExecOutput, InstanceError> {
        let meta = self.run_exec(name, body, timeout, None).await?;
        let stderr = match meta.output.get("2") {
            Some(log) => self.lxd.get_exec_log(log).await.map(|f| f.bytes),
            None => Ok(Bytes::new()),
        };
        self.forget_logs(&meta).await;
        Ok(ExecOutput {
            exit_code: meta.exit_code,
            stderr: stderr?,
        })
    }

    /// The exec's output logs as LXD streams them, within `limit` bytes together: stdout past it
    /// is refused naming `stdout`, the two together naming `stderr`.
    async fn output_streams(
        &self,
        meta: &ExecMetadata,
        limit: u64,
    ) -> Result<[Option<RawStream>; 2], InstanceError> {
        let mut streams = [None, None];
        let mut total = 0u64;
        for (slot, (fd, field)) in streams.iter_mut().zip([("1", "stdout"), ("2", "stderr")]) {
            let Some(log) = meta.output.get(fd) else {
                continue;
            };
            let stream = self.lxd.get_exec_log_stream(log).await?;
            total += stream.length().unwrap_or(0);
            if total > limit {
                return Err(InstanceError::TooLarge {
                    field: field.into(),
                    size: total,
                    limit,
                });
            }
            *slot = Some(stream);
        }
        Ok(streams)
    }

    /// Removes the exec's output logs from the host, where LXD would keep them for ever. A log
    /// being streamed stays readable: LXD opened it before it answered.
    async fn forget_logs(&self, meta: &ExecMetadata) {
        for log in meta.output.values() {
            if let Err(e) = self.lxd.delete_exec_log(log).await {
                tracing::info!(%log, "exec log not removed: {e}");
            }
        }
    }

    /// `POST /v1/instances/{name}/exec`: runs the command to its end, then hands over its output
    /// unread, at most `limit` bytes of it.
    pub async fn exec(
        &self,
        name: &str,
        req: &ExecRequest,
        limit: u64,
    ) -> Result<ExecStreams, InstanceError> {
        super::check_name(name)?;
        validate::exec_request(&req.command, &req.environment, req.cwd.as_deref())
            .map_err(|e| InstanceError::invalid(e.field, e.message))?;
        let seconds = req.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
        if seconds == 0 || seconds > MAX_TIMEOUT_S {
            return Err(InstanceError::invalid(
                "timeout_s",
                format!("must be 1-{MAX_TIMEOUT_S}"),
            ));
        }
        let mut command = req.command.clone();
        if let Some(stdin) = &req.stdin_base64 {
            let bytes = base64::engine::general_purpose::STANDARD
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
        let tag = uuid::Uuid::new_v4().to_string();
        let mut environment = req.environment.clone();
        environment.insert(validate::EXEC_TAG_VAR.into(), tag.clone());
        let body = InstanceExecPost {
            user: req.user,
            group: req.group,
            cwd: req.cwd.clone(),
            ..InstanceExecPost::recorded(command, environment)
        };
        let timeout = Duration::from_secs(seconds.into());
        let meta = match self.run_exec(name, &body, timeout, Some(&tag)).await {
            // The caller's to mend (start it), not a failing node; Cohort's own commands keep
            // LXD's answer, which the worker retries.
            Err(InstanceError::Lxd(LxdError::Api {
                status: 400,
                message,
                ..
            })) if message.contains("not running") => {
                return Err(InstanceError::Conflict(format!(
                    "{name} is not running (LXD: {message})"
                )))
            }
            other => other?,
        };
        let streams = self.output_streams(&meta, limit).await;
        self.forget_logs(&meta).await;
        let [stdout, stderr] = streams?;
        Ok(ExecStreams {
            exit_code: meta.exit_code,
            stdout,
            stderr,
        })
    }
}
