//! The agent API over HTTPS: each [`super::NodeAgent`] call as its request, and the agent's
//! answer or refusal decoded.
//!
//! Each call has the deadline of its kind ([`AgentClientConfig`]): ordinary calls the client's
//! short one, so a call in flight when a link goes dark gives its worker permit back within
//! seconds; calls that wait on the node's daemon ([`HttpAgent::daemon`]) a few minutes; calls
//! that stream a tarball or a file ([`HttpAgent::transfer`]) an hour.

use cohort_proto::agent::{
    Arrival, AttachGpus, CreateInstance, CreateSnapshot, ExecRequest, ExecResult, ExecSession,
    ExecSessionRequest, ExecSessionState, IdentityCsr, IdentityInfo, Image, ImportImage,
    InstallCertificate, Instance, Inventory, LiveLimits, NetworkPolicy, PublishInstance, Snapshot,
    SshAccess, StateChange, UpdateInstance,
};
use cohort_proto::ErrorBody;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;

use crate::app::config::AgentClientConfig;

use super::{
    AgentError, AgentFuture, AgentSocket, AgentStream, FileDownload, FileMeta, NodeAgent,
    ReceivedTarball, Tunnel,
};

/// The header that tells the agent how many bytes an answer may stream back.
const LIMIT_HEADER: &str = "X-Cohort-Limit";

/// The protocol the agent's JupyterLab route switches to.
const TUNNEL_PROTOCOL: &str = "cohort-tunnel";

/// One agent over HTTPS.
pub(super) struct HttpAgent {
    /// Its deadline is an ordinary call's (`request_timeout_s`).
    pub(super) client: reqwest::Client,
    pub(super) base: String,
    pub(super) timeouts: AgentClientConfig,
}

fn escape(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, AgentError> {
    let response = request
        .send()
        .await
        .map_err(|e| AgentError::Unreachable(format!("{e:#}")))?;
    if response.status().is_success() || response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Ok(response);
    }
    Err(refusal(response).await)
}

/// The agent's error answer, with its code and field when it sent the JSON error shape.
async fn refusal(response: reqwest::Response) -> AgentError {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    match serde_json::from_str::<ErrorBody>(&text) {
        Ok(body) => AgentError::Status {
            status,
            code: body.error.code,
            message: body.error.message,
            field: body.error.field,
        },
        Err(_) => AgentError::Status {
            status,
            code: "agent_error".into(),
            message: text,
            field: None,
        },
    }
}

async fn json<T: DeserializeOwned>(request: reqwest::RequestBuilder) -> Result<T, AgentError> {
    send(request)
        .await?
        .json()
        .await
        .map_err(|e| AgentError::Decode(e.to_string()))
}

async fn empty(request: reqwest::RequestBuilder) -> Result<(), AgentError> {
    send(request).await.map(|_| ())
}

/// The rest of an answer as it arrives; a connection cut midway is the stream's last item.
fn stream_of(response: reqwest::Response) -> AgentStream {
    use futures_util::TryStreamExt;
    Box::pin(
        response
            .bytes_stream()
            .map_err(|e| AgentError::Unreachable(format!("{e:#}"))),
    )
}

fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

impl HttpAgent {
    fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.base))
    }

    fn instance(&self, method: Method, name: &str, rest: &str) -> reqwest::RequestBuilder {
        self.req(method, &format!("/instances/{}{rest}", escape(name)))
    }

    /// A call the agent answers only once the node's daemon has done the work (it waits up to
    /// 300 s on LXD itself).
    fn daemon(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.timeout(std::time::Duration::from_secs(
            self.timeouts.daemon_timeout_s,
        ))
    }

    /// A call that streams a tarball or a file, or waits for one to be packed or fetched.
    fn transfer(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.timeout(std::time::Duration::from_secs(
            self.timeouts.transfer_timeout_s,
        ))
    }
}

impl NodeAgent for HttpAgent {
    fn jupyter_tunnel(&self, name: String) -> AgentFuture<Tunnel> {
        let request = self
            .instance(Method::GET, &name, "/jupyter")
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, TUNNEL_PROTOCOL);
        Box::pin(async move {
            let response = send(request).await?;
            if response.status() != StatusCode::SWITCHING_PROTOCOLS {
                return Err(AgentError::Decode(format!(
                    "the agent answered {} instead of switching to {TUNNEL_PROTOCOL}",
                    response.status()
                )));
            }
            let upgraded = response
                .upgrade()
                .await
                .map_err(|e| AgentError::Unreachable(format!("{e:#}")))?;
            Ok(Box::new(upgraded) as Tunnel)
        })
    }
    fn inventory(&self) -> AgentFuture<Inventory> {
        Box::pin(json(self.req(Method::GET, "/inventory")))
    }
    fn identity(&self) -> AgentFuture<IdentityInfo> {
        Box::pin(json(self.req(Method::GET, "/identity")))
    }
    fn identity_csr(&self) -> AgentFuture<IdentityCsr> {
        Box::pin(json(self.req(Method::POST, "/identity/csr")))
    }
    fn install_certificate(&self, request: InstallCertificate) -> AgentFuture<IdentityInfo> {
        Box::pin(json(
            self.req(Method::PUT, "/identity/certificate")
                .json(&request),
        ))
    }
    fn list_instances(&self) -> AgentFuture<Vec<Instance>> {
        Box::pin(json(self.req(Method::GET, "/instances?brief=true")))
    }
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance> {
        // Creating may fetch the image from the controller first, then waits on the daemon.
        Box::pin(json(
            self.transfer(self.req(Method::POST, "/instances").json(&request)),
        ))
    }
    fn get_instance(&self, name: String) -> AgentFuture<Instance> {
        Box::pin(json(self.instance(Method::GET, &name, "")))
    }
    fn change_state(&self, name: String, change: StateChange) -> AgentFuture<Instance> {
        Box::pin(json(self.daemon(
            self.instance(Method::PUT, &name, "/state").json(&change),
        )))
    }
    fn delete_instance(&self, name: String) -> AgentFuture<()> {
        let request = self.daemon(self.instance(Method::DELETE, &name, ""));
        Box::pin(async move {
            match empty(request).await {
                Err(AgentError::Status { status, .. })
                    if status == StatusCode::NOT_FOUND.as_u16() =>
                {
                    Ok(())
                }
                other => other,
            }
        })
    }
    fn exec(&self, name: String, request: ExecRequest) -> AgentFuture<ExecResult> {
        // The agent answers once the command has ended: wait as long as it may run.
        let runs = u64::from(request.timeout_s.unwrap_or(300));
        Box::pin(json(
            self.instance(Method::POST, &name, "/exec")
                .timeout(std::time::Duration::from_secs(runs + 30))
                .json(&request),
        ))
    }
    fn exec_stream(
        &self,
        name: String,
        request: ExecRequest,
        limit: u64,
    ) -> AgentFuture<AgentStream> {
        // The agent answers only once the command has ended: wait as long as it may run.
        let runs = u64::from(request.timeout_s.unwrap_or(300));
        let request = self
            .instance(Method::POST, &name, "/exec")
            .header(LIMIT_HEADER, limit)
            .timeout(std::time::Duration::from_secs(runs + 60))
            .json(&request);
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn start_exec_session(
        &self,
        name: String,
        request: ExecSessionRequest,
    ) -> AgentFuture<ExecSession> {
        Box::pin(json(
            self.instance(Method::POST, &name, "/exec-sessions")
                .json(&request),
        ))
    }
    fn exec_session_state(&self, id: String, timeout_s: u32) -> AgentFuture<ExecSessionState> {
        let request = self
            .req(Method::GET, &format!("/exec-sessions/{}", escape(&id)))
            .query(&[("timeout", timeout_s)])
            .timeout(std::time::Duration::from_secs(u64::from(timeout_s) + 30));
        Box::pin(json(request))
    }
    fn exec_session_socket(&self, id: String, secret: String) -> AgentFuture<AgentSocket> {
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 16]>());
        let request = self
            .req(
                Method::GET,
                &format!("/exec-sessions/{}/websocket", escape(&id)),
            )
            .query(&[("secret", secret)])
            .header(reqwest::header::CONNECTION, "Upgrade")
            .header(reqwest::header::UPGRADE, "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", key);
        Box::pin(async move {
            let response = request
                .send()
                .await
                .map_err(|e| AgentError::Unreachable(format!("{e:#}")))?;
            if response.status() != StatusCode::SWITCHING_PROTOCOLS {
                return Err(refusal(response).await);
            }
            response
                .upgrade()
                .await
                .map_err(|e| AgentError::Unreachable(format!("{e:#}")))
        })
    }
    fn get_file(&self, name: String, path: String, limit: u64) -> AgentFuture<FileDownload> {
        let request = self
            .transfer(self.instance(Method::GET, &name, "/files"))
            .header(LIMIT_HEADER, limit)
            .query(&[("path", path)]);
        Box::pin(async move {
            let response = send(request).await?;
            let meta = FileMeta {
                mode: header(&response, "X-Cohort-Mode"),
                uid: header(&response, "X-Cohort-Uid"),
                gid: header(&response, "X-Cohort-Gid"),
            };
            Ok(FileDownload {
                meta,
                length: response.content_length(),
                body: stream_of(response),
            })
        })
    }
    fn put_file(
        &self,
        name: String,
        path: String,
        body: Vec<u8>,
        meta: FileMeta,
    ) -> AgentFuture<()> {
        let mut request = self
            .transfer(self.instance(Method::PUT, &name, "/files"))
            .query(&[("path", path)])
            .body(body);
        for (header, value) in [
            ("X-Cohort-Mode", meta.mode),
            ("X-Cohort-Uid", meta.uid),
            ("X-Cohort-Gid", meta.gid),
        ] {
            if let Some(value) = value {
                request = request.header(header, value);
            }
        }
        Box::pin(empty(request))
    }
    fn snapshots(&self, name: String) -> AgentFuture<Vec<Snapshot>> {
        Box::pin(json(self.instance(Method::GET, &name, "/snapshots")))
    }
    fn create_snapshot(&self, name: String, request: CreateSnapshot) -> AgentFuture<Snapshot> {
        Box::pin(json(
            self.daemon(
                self.instance(Method::POST, &name, "/snapshots")
                    .json(&request),
            ),
        ))
    }
    fn restore_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()> {
        let rest = format!("/snapshots/{}/restore", escape(&snapshot));
        Box::pin(empty(self.daemon(self.instance(
            Method::POST,
            &name,
            &rest,
        ))))
    }
    fn rename_snapshot(
        &self,
        name: String,
        snapshot: String,
        request: CreateSnapshot,
    ) -> AgentFuture<Snapshot> {
        let rest = format!("/snapshots/{}", escape(&snapshot));
        Box::pin(json(self.daemon(
            self.instance(Method::POST, &name, &rest).json(&request),
        )))
    }
    fn delete_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()> {
        let rest = format!("/snapshots/{}", escape(&snapshot));
        Box::pin(empty(self.daemon(self.instance(
            Method::DELETE,
            &name,
            &rest,
        ))))
    }
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image> {
        Box::pin(json(
            self.transfer(self.req(Method::POST, "/images").json(&request)),
        ))
    }
    fn delete_image(&self, fingerprint: String) -> AgentFuture<()> {
        let request =
            self.daemon(self.req(Method::DELETE, &format!("/images/{}", escape(&fingerprint))));
        Box::pin(empty(request))
    }
    fn update_instance(&self, name: String, request: UpdateInstance) -> AgentFuture<Instance> {
        Box::pin(json(
            self.daemon(self.instance(Method::PATCH, &name, "").json(&request)),
        ))
    }
    fn lxd_state(&self, name: String) -> AgentFuture<serde_json::Value> {
        Box::pin(json(self.instance(Method::GET, &name, "/lxd-state")))
    }
    fn lxd_states(&self) -> AgentFuture<std::collections::BTreeMap<String, serde_json::Value>> {
        Box::pin(json(self.req(Method::GET, "/lxd-states")))
    }
    fn console_log(&self, name: String) -> AgentFuture<bytes::Bytes> {
        let request = self.instance(Method::GET, &name, "/console-log");
        Box::pin(async move {
            send(request)
                .await?
                .bytes()
                .await
                .map_err(|e| AgentError::Decode(e.to_string()))
        })
    }
    fn activity(
        &self,
        name: String,
        cpu_percent: u32,
    ) -> AgentFuture<cohort_proto::activity::InstanceActivity> {
        Box::pin(json(self.instance(
            Method::GET,
            &name,
            &format!("/activity?cpu_percent={cpu_percent}"),
        )))
    }
    fn detach_gpus(&self, name: String) -> AgentFuture<Instance> {
        Box::pin(json(self.daemon(self.instance(
            Method::POST,
            &name,
            "/gpus/detach",
        ))))
    }
    fn attach_gpus(&self, name: String, request: AttachGpus) -> AgentFuture<Instance> {
        Box::pin(json(self.daemon(
            self.instance(Method::PUT, &name, "/gpus").json(&request),
        )))
    }
    fn publish(
        &self,
        name: String,
        request: PublishInstance,
        dest: std::path::PathBuf,
    ) -> AgentFuture<ReceivedTarball> {
        use sha2::Digest;
        use tokio::io::AsyncWriteExt;
        // Packing a container into an image takes a while.
        let request = self.transfer(
            self.instance(Method::POST, &name, "/publish")
                .json(&request),
        );
        Box::pin(async move {
            let mut response = send(request).await?;
            let reported = header(&response, "X-Cohort-Fingerprint");
            let io = |e: std::io::Error| AgentError::Decode(format!("writing the tarball: {e}"));
            let mut file = tokio::fs::File::create(&dest).await.map_err(io)?;
            let mut hasher = sha2::Sha256::new();
            let mut size = 0u64;
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|e| AgentError::Unreachable(format!("{e:#}")))?
            {
                hasher.update(&chunk);
                size += chunk.len() as u64;
                file.write_all(&chunk).await.map_err(io)?;
            }
            file.sync_all().await.map_err(io)?;
            Ok(ReceivedTarball {
                sha256: hex::encode(hasher.finalize()),
                size,
                reported,
            })
        })
    }
    fn export_instance(&self, name: String) -> AgentFuture<AgentStream> {
        let request = self.transfer(self.instance(Method::POST, &name, "/export"));
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn import_instance(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let request = self.transfer(
            self.instance(Method::POST, &name, "/import")
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .body(reqwest::Body::wrap_stream(tarball)),
        );
        Box::pin(empty(request))
    }
    fn export_volume(&self, name: String) -> AgentFuture<AgentStream> {
        let request =
            self.transfer(self.req(Method::POST, &format!("/volumes/{}/export", escape(&name))));
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn import_volume(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let request = self.transfer(
            self.req(Method::POST, &format!("/volumes/{}/import", escape(&name)))
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .body(reqwest::Body::wrap_stream(tarball)),
        );
        Box::pin(empty(request))
    }
    fn archive_volume(&self, name: String) -> AgentFuture<AgentStream> {
        let request =
            self.transfer(self.req(Method::POST, &format!("/volumes/{}/archive", escape(&name))));
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn arrive(&self, name: String, arrival: Arrival) -> AgentFuture<Instance> {
        Box::pin(json(self.daemon(
            self.instance(Method::PUT, &name, "/arrival").json(&arrival),
        )))
    }
    fn set_ssh(&self, name: String, access: SshAccess) -> AgentFuture<Instance> {
        // Runs a command in the container.
        Box::pin(json(
            self.daemon(self.instance(Method::PUT, &name, "/ssh").json(&access)),
        ))
    }
    fn set_network_policy(&self, name: String, policy: NetworkPolicy) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/network-policy")
                .json(&policy),
        ))
    }
    fn set_limits(&self, name: String, limits: LiveLimits) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/limits").json(&limits),
        ))
    }
    fn restore_home(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHome,
    ) -> AgentFuture<()> {
        let request = self.instance(Method::POST, &name, "/home/restore");
        Box::pin(empty(self.daemon(request).json(&restore)))
    }
    fn restore_home_path(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHomePath,
    ) -> AgentFuture<()> {
        // A directory may be large: the agent's push and unpacking take up to 25 min each.
        let request = self.instance(Method::POST, &name, "/home/restore-path");
        Box::pin(empty(self.transfer(request).json(&restore)))
    }
    fn check_home_path(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHomePath,
    ) -> AgentFuture<()> {
        let check = cohort_proto::agent::RestoreHomePath {
            check: true,
            ..restore
        };
        let request = self.instance(Method::POST, &name, "/home/restore-path");
        Box::pin(empty(self.daemon(request).json(&check)))
    }
    fn home_snapshots(
        &self,
        volume: String,
    ) -> AgentFuture<Vec<cohort_proto::agent::HomeSnapshot>> {
        let path = format!("/volumes/{}/snapshots", escape(&volume));
        Box::pin(json(self.req(Method::GET, &path)))
    }
    fn set_home_snapshots(
        &self,
        volume: String,
        schedule: cohort_proto::agent::HomeSnapshotSchedule,
    ) -> AgentFuture<()> {
        let path = format!("/volumes/{}/snapshot-schedule", escape(&volume));
        Box::pin(empty(
            self.daemon(self.req(Method::PUT, &path)).json(&schedule),
        ))
    }
    fn delete_volume(&self, name: String) -> AgentFuture<()> {
        let request = self.daemon(self.req(Method::DELETE, &format!("/volumes/{}", escape(&name))));
        Box::pin(async move {
            match empty(request).await {
                Err(AgentError::Status { status, .. })
                    if status == StatusCode::NOT_FOUND.as_u16() =>
                {
                    Ok(())
                }
                other => other,
            }
        })
    }
    fn import_dataset(&self, request: cohort_proto::agent::ImportDataset) -> AgentFuture<()> {
        Box::pin(empty(
            self.transfer(self.req(Method::POST, "/datasets").json(&request)),
        ))
    }
    fn set_datasets(
        &self,
        name: String,
        request: cohort_proto::agent::InstanceDatasets,
    ) -> AgentFuture<()> {
        Box::pin(empty(
            self.daemon(
                self.instance(Method::PUT, &name, "/datasets")
                    .json(&request),
            ),
        ))
    }
    fn prune_datasets(
        &self,
        request: cohort_proto::agent::PruneDatasets,
    ) -> AgentFuture<Vec<String>> {
        Box::pin(json(self.daemon(
            self.req(Method::POST, "/datasets/prune").json(&request),
        )))
    }
}
