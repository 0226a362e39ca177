//! `POST /1.0/instances/{name}/exec` and the exec logs it leaves: a command run to its end with
//! its output recorded, or started with websockets for a session (`client/lxd_instances.go`:
//! `ExecInstance`; `shared/api/instance_exec.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use hyper::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{to_json, RawFile, RawStream};
use super::instances::instance_url;
use super::{Lxd, LxdError};

/// The body of an exec (`InstanceExecPost`). `user`, `group` and `cwd` are sent only when set:
/// LXD then takes the container's root and `/root`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct InstanceExecPost {
    pub command: Vec<String>,
    pub environment: BTreeMap<String, String>,
    pub interactive: bool,
    #[serde(rename = "wait-for-websocket")]
    pub wait_for_websocket: bool,
    #[serde(rename = "record-output")]
    pub record_output: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl InstanceExecPost {
    /// `command` run as root to its end with no stdin, its output recorded in logs.
    pub fn recorded(command: Vec<String>, environment: BTreeMap<String, String>) -> Self {
        InstanceExecPost {
            command,
            environment,
            record_output: true,
            ..Default::default()
        }
    }
}

/// What a recorded exec's operation leaves in its metadata: the exit code and the URLs of its
/// output logs by file descriptor (`"1"`, `"2"`).
#[derive(Debug, Deserialize)]
pub struct ExecRecord {
    #[serde(rename = "return", default)]
    pub exit_code: i32,
    #[serde(default)]
    pub output: BTreeMap<String, String>,
}

impl Lxd {
    /// Runs `exec` (with `record-output`) in `name` and waits for its end, up to `timeout`.
    pub async fn exec_instance(
        &self,
        name: &str,
        exec: &InstanceExecPost,
        timeout: Duration,
    ) -> Result<ExecRecord, LxdError> {
        let path = format!("{}/exec", instance_url(name));
        let meta = self
            .call_within(Method::POST, &path, Some(&to_json(exec)), timeout)
            .await?;
        serde_json::from_value(meta).map_err(|e| LxdError::Decode {
            what: format!("exec in {name}"),
            detail: e.to_string(),
        })
    }

    /// Starts `exec` (with `wait-for-websocket`) in `name` without waiting: the operation's id
    /// and the operation object, whose `metadata.fds` holds the websockets' secrets.
    pub async fn exec_instance_session(
        &self,
        name: &str,
        exec: &InstanceExecPost,
    ) -> Result<(String, Value), LxdError> {
        let path = format!("{}/exec", instance_url(name));
        self.start(&path, &to_json(exec)).await
    }

    /// An exec log, read whole; `log` is the URL the exec's record names.
    pub async fn get_exec_log(&self, log: &str) -> Result<RawFile, LxdError> {
        self.get_raw(log).await
    }

    /// An exec log, unread.
    pub async fn get_exec_log_stream(&self, log: &str) -> Result<RawStream, LxdError> {
        self.get_stream(log).await
    }

    /// Removes an exec log from the host.
    pub async fn delete_exec_log(&self, log: &str) -> Result<(), LxdError> {
        self.call(Method::DELETE, log, None).await.map(|_| ())
    }
}
