//! The controller's side of the agent API (`cohort_proto::agent`): mutual TLS with the
//! controller's client certificate, the agent's server certificate checked against its pinned
//! fingerprints (its live certificates) and chained to the Cohort CA. [`NodeAgent`] is the seam unit tests fake.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use cohort_proto::agent::{
    Arrival, AttachGpus, CreateInstance, CreateSnapshot, ExecRequest, ExecResult, ExecSession,
    ExecSessionRequest, ExecSessionState, IdentityCsr, IdentityInfo, Image, ImportImage,
    InstallCertificate, Instance, Inventory, LiveLimits, NetworkPolicy, PublishInstance, Snapshot,
    SshAccess, StateChange, UpdateInstance,
};
use cohort_proto::api::instances::ObservedState;
use cohort_proto::ErrorBody;
use reqwest::{Method, StatusCode};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde::de::DeserializeOwned;

use crate::nodes::pki::{fingerprint, Pki};

/// Cohort's observed state for an LXD status (`Running`, `Stopped`, anything else an error).
pub fn observed(status: &str) -> ObservedState {
    match status {
        "Running" => ObservedState::Running,
        "Stopped" => ObservedState::Stopped,
        _ => ObservedState::Error,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// the agent could not be reached or the TLS handshake failed
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// the agent answered with an error
    #[error("agent answered {status}: {message}")]
    Status {
        status: u16,
        code: String,
        message: String,
        field: Option<String>,
    },
    /// the agent's answer did not decode
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// the TLS client could not be built
    #[error("tls setup: {0}")]
    Tls(String),
}

impl AgentError {
    /// True when retrying cannot help (the agent refused the request itself).
    pub fn is_permanent(&self) -> bool {
        matches!(self, AgentError::Status { status, .. } if (400..500).contains(status) && *status != 408 && *status != 429)
    }
}

pub type AgentFuture<T> = Pin<Box<dyn Future<Output = Result<T, AgentError>> + Send>>;

/// A body the agent streams (a file, an exec's output), relayed as it comes.
pub type AgentStream = futures_util::stream::BoxStream<'static, Result<bytes::Bytes, AgentError>>;

/// A websocket of LXD's, reached through the agent (a raw upgraded connection).
pub type AgentSocket = reqwest::Upgraded;

/// A file being read from a container: its owner and mode, its length when the agent knows it,
/// and its content still on the way.
pub struct FileDownload {
    pub meta: FileMeta,
    pub length: Option<u64>,
    pub body: AgentStream,
}

/// Longest a backup's tarball may take to leave one node or to be imported on another (the
/// client's usual ten minutes is too short for a large home).
const TRANSFER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

/// The header that tells the agent how many bytes an answer may stream back.
const LIMIT_HEADER: &str = "X-Cohort-Limit";

/// A file read from or written to a container, with its ownership and mode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMeta {
    pub mode: Option<String>,
    pub uid: Option<String>,
    pub gid: Option<String>,
}

/// A tarball received from an agent's publish, written to a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedTarball {
    /// SHA-256 of the bytes written (lowercase hex).
    pub sha256: String,
    pub size: u64,
    /// The fingerprint the agent reported (LXD's).
    pub reported: Option<String>,
}

/// One node's agent, as the controller uses it.
pub trait NodeAgent: Send + Sync {
    fn inventory(&self) -> AgentFuture<Inventory>;
    fn list_instances(&self) -> AgentFuture<Vec<Instance>>;
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance>;
    fn get_instance(&self, name: String) -> AgentFuture<Instance>;
    fn change_state(&self, name: String, change: StateChange) -> AgentFuture<Instance>;
    /// Succeeds also when the instance is already gone.
    fn delete_instance(&self, name: String) -> AgentFuture<()>;
    /// An exec whose result is read whole (Cohort's own commands).
    fn exec(&self, name: String, request: ExecRequest) -> AgentFuture<ExecResult>;
    /// An exec whose result (the JSON of [`ExecResult`]) streams back, at most `limit` bytes of
    /// output.
    fn exec_stream(
        &self,
        name: String,
        request: ExecRequest,
        limit: u64,
    ) -> AgentFuture<AgentStream>;
    /// A file of at most `limit` bytes, streamed.
    fn get_file(&self, name: String, path: String, limit: u64) -> AgentFuture<FileDownload>;
    fn put_file(
        &self,
        name: String,
        path: String,
        body: Vec<u8>,
        meta: FileMeta,
    ) -> AgentFuture<()>;
    fn snapshots(&self, name: String) -> AgentFuture<Vec<Snapshot>>;
    fn create_snapshot(&self, name: String, request: CreateSnapshot) -> AgentFuture<Snapshot>;
    fn restore_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()>;
    fn delete_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()>;
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image>;
    fn update_instance(&self, name: String, request: UpdateInstance) -> AgentFuture<Instance>;
    /// Removes the instance's `cohort-gpu*` devices (the reclaimer's `detach`); none is success.
    fn detach_gpus(&self, name: String) -> AgentFuture<Instance>;
    /// Replaces the stopped instance's `cohort-gpu*` devices with these (GPUs it got back).
    fn attach_gpus(&self, name: String, request: AttachGpus) -> AgentFuture<Instance>;
    /// Publishes a stopped instance; its tarball is streamed into `dest`.
    fn publish(
        &self,
        name: String,
        request: PublishInstance,
        dest: std::path::PathBuf,
    ) -> AgentFuture<ReceivedTarball>;
    /// Replaces the SSH user's keys (or password) in a running instance.
    fn set_ssh(&self, name: String, access: SshAccess) -> AgentFuture<Instance>;
    /// Records the course's network policy on an instance; the agent applies it at once.
    fn set_network_policy(&self, name: String, policy: NetworkPolicy) -> AgentFuture<Instance>;
    /// Deletes a `home-*` custom volume; succeeds also when it is already gone.
    fn delete_volume(&self, name: String) -> AgentFuture<()>;
    /// The stopped instance's backup tarball (its root disk and snapshots), streamed.
    fn export_instance(&self, name: String) -> AgentFuture<AgentStream> {
        let _ = name;
        Box::pin(async { Err(AgentError::Decode("no backups here".into())) })
    }
    /// Imports an instance from another node's backup tarball, streamed in as it comes.
    fn import_instance(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let _ = (name, tarball);
        Box::pin(async { Err(AgentError::Decode("no backups here".into())) })
    }
    /// A `home-*` volume's backup tarball, streamed.
    fn export_volume(&self, name: String) -> AgentFuture<AgentStream> {
        let _ = name;
        Box::pin(async { Err(AgentError::Decode("no backups here".into())) })
    }
    /// Imports a `home-*` volume from another node's backup tarball, streamed in.
    fn import_volume(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let _ = (name, tarball);
        Box::pin(async { Err(AgentError::Decode("no backups here".into())) })
    }
    /// Makes an imported (stopped) instance this node's: its SSH forward and GPUs here.
    fn arrive(&self, name: String, arrival: Arrival) -> AgentFuture<Instance> {
        let _ = (name, arrival);
        Box::pin(async { Err(AgentError::Decode("no backups here".into())) })
    }
    /// Sets the instance's cores and memory; LXD applies them to a running container at once.
    fn set_limits(&self, name: String, limits: LiveLimits) -> AgentFuture<Instance> {
        let _ = (name, limits);
        Box::pin(async { Err(AgentError::Decode("no live limits here".into())) })
    }
    /// Starts an exec whose websockets are attached later (`exec_session_socket`).
    fn start_exec_session(
        &self,
        name: String,
        request: ExecSessionRequest,
    ) -> AgentFuture<ExecSession> {
        let _ = (name, request);
        Box::pin(async { Err(AgentError::Decode("no exec sessions here".into())) })
    }
    /// The session's state, waiting up to `timeout_s` for its end.
    fn exec_session_state(&self, id: String, timeout_s: u32) -> AgentFuture<ExecSessionState> {
        let _ = (id, timeout_s);
        Box::pin(async { Err(AgentError::Decode("no exec sessions here".into())) })
    }
    /// One of the session's websockets, upgraded: the bytes are LXD's websocket, end to end.
    fn exec_session_socket(&self, id: String, secret: String) -> AgentFuture<AgentSocket> {
        let _ = (id, secret);
        Box::pin(async { Err(AgentError::Decode("no exec sessions here".into())) })
    }
    /// A pipe to the instance's JupyterLab, for the portal's proxy.
    fn jupyter_tunnel(&self, name: String) -> AgentFuture<Tunnel> {
        let _ = name;
        Box::pin(async { Err(AgentError::Decode("no JupyterLab tunnel here".into())) })
    }
    /// The certificate the agent serves now.
    fn identity(&self) -> AgentFuture<IdentityInfo> {
        Box::pin(async { Err(AgentError::Decode("no identity here".into())) })
    }
    /// Has the agent make its next key; answers the key's CSR.
    fn identity_csr(&self) -> AgentFuture<IdentityCsr> {
        Box::pin(async { Err(AgentError::Decode("no identity here".into())) })
    }
    /// Hands the agent its renewed certificate; it serves it from the next handshake on.
    fn install_certificate(&self, request: InstallCertificate) -> AgentFuture<IdentityInfo> {
        let _ = request;
        Box::pin(async { Err(AgentError::Decode("no identity here".into())) })
    }
}

/// A byte pipe through the agent to an instance's JupyterLab (the agent's fixed port only).
pub trait TunnelIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> TunnelIo for T {}
pub type Tunnel = Box<dyn TunnelIo>;

/// The protocol the agent's JupyterLab route switches to.
const TUNNEL_PROTOCOL: &str = "cohort-tunnel";

/// Where a node's agent is and which certificates it may present (its live ones).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentTarget {
    pub node_name: String,
    pub url: String,
    pub pins: Vec<String>,
}

/// Gives a [`NodeAgent`] for a target.
pub trait AgentConnector: Send + Sync {
    fn connect(&self, target: &AgentTarget) -> Result<Arc<dyn NodeAgent>, AgentError>;
}

/// The real connector: one reqwest client per (node, pin), kept for reuse.
pub struct MtlsConnector {
    identity_pem: Vec<u8>,
    ca_pem: String,
    clients: Mutex<HashMap<AgentTarget, reqwest::Client>>,
}

impl MtlsConnector {
    pub fn new(pki: &Pki) -> Self {
        let mut identity_pem = pki.client_cert_pem.clone().into_bytes();
        identity_pem.extend_from_slice(pki.ca_pem().as_bytes());
        identity_pem.extend_from_slice(pki.client_key_pem.as_bytes());
        MtlsConnector {
            identity_pem,
            ca_pem: pki.ca_pem().to_string(),
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn build(&self, pins: &[String]) -> Result<reqwest::Client, AgentError> {
        let tls = |e: &dyn std::fmt::Display| AgentError::Tls(e.to_string());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut self.ca_pem.as_bytes()) {
            roots.add(cert.map_err(|e| tls(&e))?).map_err(|e| tls(&e))?;
        }
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| tls(&e))?;
        let certs: Vec<CertificateDer<'static>> =
            rustls_pemfile::certs(&mut self.identity_pem.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| tls(&e))?;
        let key = rustls_pemfile::private_key(&mut self.identity_pem.as_slice())
            .map_err(|e| tls(&e))?
            .ok_or_else(|| AgentError::Tls("no client key".into()))?;
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier {
                pins: pins.to_vec(),
                chain,
            }))
            .with_client_auth_cert(certs, key)
            .map_err(|e| tls(&e))?;
        reqwest::Client::builder()
            .use_preconfigured_tls(config)
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(600))
            .build()
            .map_err(|e| tls(&e))
    }
}

impl AgentConnector for MtlsConnector {
    fn connect(&self, target: &AgentTarget) -> Result<Arc<dyn NodeAgent>, AgentError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let client = match clients.get(target) {
            Some(c) => c.clone(),
            None => {
                let c = self.build(&target.pins)?;
                clients.insert(target.clone(), c.clone());
                c
            }
        };
        Ok(Arc::new(HttpAgent {
            client,
            base: format!("{}/v1", target.url.trim_end_matches('/')),
        }))
    }
}

/// Accepts only a pinned certificate, and only if it also chains to the Cohort CA.
#[derive(Debug)]
struct PinnedVerifier {
    pins: Vec<String>,
    chain: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if !self.pins.contains(&fingerprint(end_entity)) {
            return Err(rustls::Error::General(
                "agent certificate does not match the pinned fingerprint".into(),
            ));
        }
        self.chain
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain.supported_verify_schemes()
    }
}

/// One agent over HTTPS.
struct HttpAgent {
    client: reqwest::Client,
    base: String,
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
        Box::pin(json(self.req(Method::GET, "/instances")))
    }
    fn create_instance(&self, request: CreateInstance) -> AgentFuture<Instance> {
        Box::pin(json(self.req(Method::POST, "/instances").json(&request)))
    }
    fn get_instance(&self, name: String) -> AgentFuture<Instance> {
        Box::pin(json(self.instance(Method::GET, &name, "")))
    }
    fn change_state(&self, name: String, change: StateChange) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/state").json(&change),
        ))
    }
    fn delete_instance(&self, name: String) -> AgentFuture<()> {
        let request = self.instance(Method::DELETE, &name, "");
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
        Box::pin(json(
            self.instance(Method::POST, &name, "/exec").json(&request),
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
            .instance(Method::GET, &name, "/files")
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
            .instance(Method::PUT, &name, "/files")
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
            self.instance(Method::POST, &name, "/snapshots")
                .json(&request),
        ))
    }
    fn restore_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()> {
        let rest = format!("/snapshots/{}/restore", escape(&snapshot));
        Box::pin(empty(self.instance(Method::POST, &name, &rest)))
    }
    fn delete_snapshot(&self, name: String, snapshot: String) -> AgentFuture<()> {
        let rest = format!("/snapshots/{}", escape(&snapshot));
        Box::pin(empty(self.instance(Method::DELETE, &name, &rest)))
    }
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image> {
        Box::pin(json(self.req(Method::POST, "/images").json(&request)))
    }
    fn update_instance(&self, name: String, request: UpdateInstance) -> AgentFuture<Instance> {
        Box::pin(json(self.instance(Method::PATCH, &name, "").json(&request)))
    }
    fn detach_gpus(&self, name: String) -> AgentFuture<Instance> {
        Box::pin(json(self.instance(Method::POST, &name, "/gpus/detach")))
    }
    fn attach_gpus(&self, name: String, request: AttachGpus) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/gpus").json(&request),
        ))
    }
    fn publish(
        &self,
        name: String,
        request: PublishInstance,
        dest: std::path::PathBuf,
    ) -> AgentFuture<ReceivedTarball> {
        use sha2::Digest;
        use tokio::io::AsyncWriteExt;
        let request = self
            .instance(Method::POST, &name, "/publish")
            .json(&request)
            // Packing a container into an image takes a while.
            .timeout(std::time::Duration::from_secs(3600));
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
        let request = self
            .instance(Method::POST, &name, "/export")
            .timeout(TRANSFER_TIMEOUT);
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn import_instance(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let request = self
            .instance(Method::POST, &name, "/import")
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(reqwest::Body::wrap_stream(tarball))
            .timeout(TRANSFER_TIMEOUT);
        Box::pin(empty(request))
    }
    fn export_volume(&self, name: String) -> AgentFuture<AgentStream> {
        let request = self
            .req(Method::POST, &format!("/volumes/{}/export", escape(&name)))
            .timeout(TRANSFER_TIMEOUT);
        Box::pin(async move { Ok(stream_of(send(request).await?)) })
    }
    fn import_volume(&self, name: String, tarball: AgentStream) -> AgentFuture<()> {
        let request = self
            .req(Method::POST, &format!("/volumes/{}/import", escape(&name)))
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .body(reqwest::Body::wrap_stream(tarball))
            .timeout(TRANSFER_TIMEOUT);
        Box::pin(empty(request))
    }
    fn arrive(&self, name: String, arrival: Arrival) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/arrival").json(&arrival),
        ))
    }
    fn set_ssh(&self, name: String, access: SshAccess) -> AgentFuture<Instance> {
        Box::pin(json(
            self.instance(Method::PUT, &name, "/ssh").json(&access),
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
    fn delete_volume(&self, name: String) -> AgentFuture<()> {
        let request = self.req(Method::DELETE, &format!("/volumes/{}", escape(&name)));
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
}
