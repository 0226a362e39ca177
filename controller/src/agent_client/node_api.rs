//! The agent API as the controller uses it: [`NodeAgent`], one node's agent (the seam unit
//! tests fake), and [`AgentConnector`], which gives one for a node; the types they pass.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cohort_proto::agent::{
    Arrival, AttachGpus, CreateInstance, CreateSnapshot, ExecRequest, ExecResult, ExecSession,
    ExecSessionRequest, ExecSessionState, IdentityCsr, IdentityInfo, Image, ImportImage,
    InstallCertificate, Instance, Inventory, LiveLimits, NetworkPolicy, PublishInstance, Snapshot,
    SshAccess, StateChange, UpdateInstance,
};
use cohort_proto::api::instances::ObservedState;

use super::AgentError;

/// Cohort's observed state for an LXD status (`Running`, `Stopped`, anything else an error).
pub fn observed(status: &str) -> ObservedState {
    match status {
        "Running" => ObservedState::Running,
        "Stopped" => ObservedState::Stopped,
        _ => ObservedState::Error,
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
    /// Every instance of the node, brief: names, statuses, config, devices and GPUs, without
    /// the daemon's state or an SSH probe of each (`ssh_ready` false). The poll and a
    /// provision's look at the nodes read no more.
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
    /// Gives snapshot `snapshot` of `name` the name `request.name`.
    fn rename_snapshot(
        &self,
        name: String,
        snapshot: String,
        request: CreateSnapshot,
    ) -> AgentFuture<Snapshot> {
        let _ = (name, snapshot, request);
        not_offered("snapshot rename")
    }
    fn import_image(&self, request: ImportImage) -> AgentFuture<Image>;
    /// Deletes image `fingerprint` and its aliases from the node (none there is done too).
    fn delete_image(&self, fingerprint: String) -> AgentFuture<()> {
        let _ = fingerprint;
        not_offered("image delete")
    }
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
    /// A `home-*` volume's snapshots, oldest first (404 when the volume is absent).
    fn home_snapshots(&self, volume: String)
        -> AgentFuture<Vec<cohort_proto::agent::HomeSnapshot>>;
    /// Restores the instance's home volume from one of its snapshots (stopping and starting a
    /// running container around it).
    fn restore_home(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHome,
    ) -> AgentFuture<()>;
    /// Copies one path of a home snapshot into the running instance's `~/restored/`.
    fn restore_home_path(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHomePath,
    ) -> AgentFuture<()>;
    /// Only says whether [`NodeAgent::restore_home_path`] can copy `restore`'s path (the
    /// snapshot and the path there, through no link; the container running): a 4xx naming
    /// `snapshot` or `path` when not. Changes nothing.
    fn check_home_path(
        &self,
        name: String,
        restore: cohort_proto::agent::RestoreHomePath,
    ) -> AgentFuture<()>;
    /// Sets a `home-*` volume's snapshot schedule and expiry (404 when the volume is absent).
    fn set_home_snapshots(
        &self,
        volume: String,
        schedule: cohort_proto::agent::HomeSnapshotSchedule,
    ) -> AgentFuture<()>;
    /// The stopped instance's backup tarball (its root disk and snapshots), streamed.
    fn export_instance(&self, name: String) -> AgentFuture<AgentStream>;
    /// Imports an instance from another node's backup tarball, streamed in as it comes.
    fn import_instance(&self, name: String, tarball: AgentStream) -> AgentFuture<()>;
    /// A `home-*` volume's backup tarball, streamed.
    fn export_volume(&self, name: String) -> AgentFuture<AgentStream>;
    /// Imports a `home-*` volume from another node's backup tarball, streamed in.
    fn import_volume(&self, name: String, tarball: AgentStream) -> AgentFuture<()>;
    /// A `home-*` volume's files as a gzip tarball (a home archived at a term's end), streamed.
    /// Only the real agent makes one; a test double that does not say otherwise refuses.
    fn archive_volume(&self, name: String) -> AgentFuture<AgentStream> {
        Box::pin(async move {
            Err(AgentError::Status {
                status: 501,
                code: "not_implemented".into(),
                message: format!("this agent cannot archive {name}"),
                field: None,
            })
        })
    }
    /// Makes an imported (stopped) instance this node's: its SSH forward and GPUs here.
    fn arrive(&self, name: String, arrival: Arrival) -> AgentFuture<Instance>;
    /// Sets the instance's cores and memory; LXD applies them to a running container at once.
    fn set_limits(&self, name: String, limits: LiveLimits) -> AgentFuture<Instance>;
    /// Starts an exec whose websockets are attached later (`exec_session_socket`).
    fn start_exec_session(
        &self,
        name: String,
        request: ExecSessionRequest,
    ) -> AgentFuture<ExecSession>;
    /// The session's state, waiting up to `timeout_s` for its end.
    fn exec_session_state(&self, id: String, timeout_s: u32) -> AgentFuture<ExecSessionState>;
    /// One of the session's websockets, upgraded: the bytes are LXD's websocket, end to end.
    fn exec_session_socket(&self, id: String, secret: String) -> AgentFuture<AgentSocket>;
    /// A pipe to the instance's JupyterLab, for the portal's proxy.
    fn jupyter_tunnel(&self, name: String) -> AgentFuture<Tunnel>;
    /// What the running instance is doing now (terminal input, busy processes at `cpu_percent`
    /// of a core or more, JupyterLab's kernels and terminals); the reclaimer asks before an
    /// idle stop. Takes about a second (the agent samples CPU time).
    fn activity(
        &self,
        name: String,
        cpu_percent: u32,
    ) -> AgentFuture<cohort_proto::activity::InstanceActivity>;
    /// The certificate the agent serves now.
    fn identity(&self) -> AgentFuture<IdentityInfo>;
    /// Makes a dataset's volume from the controller's data store unless the node has it.
    fn import_dataset(&self, request: cohort_proto::agent::ImportDataset) -> AgentFuture<()>;
    /// The instance's dataset mounts become these, live.
    fn set_datasets(
        &self,
        name: String,
        request: cohort_proto::agent::InstanceDatasets,
    ) -> AgentFuture<()>;
    /// Deletes the dataset volumes not kept that no instance mounts; their names.
    fn prune_datasets(
        &self,
        request: cohort_proto::agent::PruneDatasets,
    ) -> AgentFuture<Vec<String>>;
    /// Has the agent make its next key; answers the key's CSR.
    fn identity_csr(&self) -> AgentFuture<IdentityCsr>;
    /// Hands the agent its renewed certificate; it serves it from the next handshake on.
    fn install_certificate(&self, request: InstallCertificate) -> AgentFuture<IdentityInfo>;
    /// LXD's own state object of an instance (addresses per interface, usage), passed through
    /// for the LXD-style API. Agents that do not offer it (test fakes) refuse it.
    fn lxd_state(&self, name: String) -> AgentFuture<serde_json::Value> {
        let _ = name;
        not_offered("lxd-state")
    }
    /// LXD's state objects of every instance on the node, by name.
    fn lxd_states(&self) -> AgentFuture<std::collections::BTreeMap<String, serde_json::Value>> {
        not_offered("lxd-states")
    }
    /// The console log LXD keeps of a container (`lxc console --show-log`).
    fn console_log(&self, name: String) -> AgentFuture<bytes::Bytes> {
        let _ = name;
        not_offered("console-log")
    }
}

/// The answer of a [`NodeAgent`] for a call it does not offer.
fn not_offered<T: Send + 'static>(call: &'static str) -> AgentFuture<T> {
    Box::pin(async move {
        Err(AgentError::Status {
            status: 501,
            code: "not_offered".into(),
            message: format!("this agent does not offer {call}"),
            field: None,
        })
    })
}

/// A byte pipe through the agent to an instance's JupyterLab (the agent's fixed port only).
pub trait TunnelIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> TunnelIo for T {}
pub type Tunnel = Box<dyn TunnelIo>;

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
