//! The controller<->agent API, served by the agent over mutual TLS under `/v1`.
//!
//! | route                                         | body / answer                      |
//! |-----------------------------------------------|------------------------------------|
//! | `GET /v1/health`                              | [`Health`]                         |
//! | `GET /v1/inventory`                           | [`Inventory`]                      |
//! | `GET /v1/instances`                           | `Vec<Instance>` (one LXD call)     |
//! | `POST /v1/instances`                          | [`CreateInstance`] -> [`Instance`] |
//! | `GET /v1/instances/{name}`                    | [`Instance`]                       |
//! | `PATCH /v1/instances/{name}`                  | [`UpdateInstance`] -> [`Instance`] |
//! | `PUT /v1/instances/{name}/state`              | [`StateChange`] -> [`Instance`]    |
//! | `PUT /v1/instances/{name}/gpus`               | [`AttachGpus`] -> [`Instance`]     |
//! | `PUT /v1/instances/{name}/limits`             | [`LiveLimits`] -> [`Instance`]     |
//! | `POST /v1/instances/{name}/gpus/detach`       | [`Instance`]                       |
//! | `POST /v1/instances/{name}/publish`           | [`PublishInstance`] -> tarball; `X-Cohort-Fingerprint` |
//! | `DELETE /v1/instances/{name}`                 | 204 (also when already absent)     |
//! | `POST /v1/instances/{name}/export`            | the stopped instance's backup tarball, streamed |
//! | `POST /v1/instances/{name}/import`            | a backup tarball in, streamed -> 204 |
//! | `PUT /v1/instances/{name}/arrival`            | [`Arrival`] -> [`Instance`] (an imported instance made this node's) |
//! | `POST /v1/volumes/{name}/export`              | a home volume's backup tarball, streamed |
//! | `POST /v1/volumes/{name}/import`              | a backup tarball in, streamed -> 204 |
//! | `PUT /v1/volumes/{name}/snapshot-schedule`    | [`HomeSnapshotSchedule`] -> 204 (404: no such volume) |
//! | `GET /v1/volumes/{name}/snapshots`            | `Vec<HomeSnapshot>`, oldest first  |
//! | `POST /v1/instances/{name}/home/restore`      | [`RestoreHome`] -> 204 (stops and starts a running container around it) |
//! | `POST /v1/instances/{name}/home/restore-path` | [`RestoreHomePath`] -> 204 (a copy into `~/restored/`, the container running) |
//! | `POST /v1/instances/{name}/exec`              | [`ExecRequest`] -> [`ExecResult`] (streamed; `X-Cohort-Limit`) |
//! | `POST /v1/instances/{name}/exec-sessions`     | [`ExecSessionRequest`] -> [`ExecSession`] (LXD's `wait-for-websocket`) |
//! | `GET /v1/exec-sessions/{op}/websocket?secret=S` | HTTP upgrade, piped to LXD's operation websocket |
//! | `GET /v1/exec-sessions/{op}?timeout=N`        | [`ExecSessionState`] (waits up to N s for its end) |
//! | `GET /v1/instances/{name}/files?path=P`       | raw bytes, streamed; `X-Cohort-Mode/Uid/Gid`, `X-Cohort-Limit` |
//! | `PUT /v1/instances/{name}/files?path=P`       | raw bytes in; same headers         |
//! | `PUT /v1/instances/{name}/ssh`                | [`SshAccess`] (replace keys/user)  |
//! | `PUT /v1/instances/{name}/network-policy`     | [`NetworkPolicy`] -> [`Instance`]  |
//! | `GET /v1/instances/{name}/snapshots`          | `Vec<Snapshot>`                    |
//! | `POST /v1/instances/{name}/snapshots`         | [`CreateSnapshot`] -> [`Snapshot`] |
//! | `POST /v1/instances/{name}/snapshots/{s}/restore` | 204                            |
//! | `POST /v1/instances/{name}/snapshots/{s}`      | [`CreateSnapshot`] (the new name) -> [`Snapshot`] |
//! | `DELETE /v1/instances/{name}/snapshots/{s}`   | 204                                |
//! | `GET /v1/images`                              | `Vec<Image>`                       |
//! | `POST /v1/images`                             | tarball body, `X-Cohort-Alias` -> [`Image`]; or JSON [`ImportImage`] |
//! | `DELETE /v1/images/{fingerprint}`             | 204: the image and its aliases gone from LXD (none there is 204 too) |
//! | `GET /v1/metrics`                             | Prometheus text                    |
//! | `GET /v1/instances/{name}/activity?cpu_percent=N` | [`crate::activity::InstanceActivity`] |
//! | `GET /v1/identity`                            | [`IdentityInfo`] (the certificate served) |
//! | `POST /v1/identity/csr`                       | [`IdentityCsr`] (a new key, kept aside) |
//! | `PUT /v1/identity/certificate`                | [`InstallCertificate`] -> [`IdentityInfo`] |
//!
//! Errors use [`crate::ErrorBody`]; a 409 `conflict` answers a create whose name exists with
//! another idempotency key or spec. `X-Cohort-Limit: BYTES` on an exec or a file pull is the
//! most output (stdout and stderr together) or file the answer may carry: more is a 413
//! `too_large` naming `stdout`, `stderr` or `path` before anything streams.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    pub node_name: String,
    pub agent_version: String,
    pub lxd_version: String,
    pub lxd_project: String,
}

/// The certificate an agent serves: what the controller renews before it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityInfo {
    /// SHA-256 of the certificate's DER, lowercase hex (what the controller pins).
    pub fingerprint: String,
    pub not_after: DateTime<Utc>,
}

/// A CSR for the key the agent made for its next certificate; its current key and certificate
/// stay in use until [`InstallCertificate`] brings the new one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdentityCsr {
    pub csr_pem: String,
}

/// The renewed certificate for the key of the last [`IdentityCsr`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallCertificate {
    pub certificate_pem: String,
}

/// What a node has: host facts, LXD, GPUs. Polled by the controller on an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Inventory {
    pub node_name: String,
    pub host: HostFacts,
    pub lxd: LxdFacts,
    pub gpus: GpuInventory,
    /// True only when the NVIDIA container tools LXD needs for `nvidia.runtime` are present.
    pub nvidia_runtime: bool,
    pub images: Vec<Image>,
    /// The network containers get a NIC on; absent where the node has none (SSH then goes
    /// through LXD's classic proxy, one forkproxy per container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkFacts>,
}

/// The node network as the agent has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkFacts {
    /// The LXD network (a bridge).
    pub name: String,
    /// Its IPv4 subnet, e.g. `10.161.16.0/22`.
    pub subnet: String,
    /// The bridge's own address: the containers' gateway and DNS server.
    pub gateway: String,
    /// Where NAT SSH forwards listen when the controller names no concrete address.
    pub ssh_address: String,
    /// Addresses still free for containers.
    pub free_addresses: u32,
}

/// A course's network policy, applied by the agent to each of the course's containers at once,
/// without a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NetworkPolicy {
    /// Where new connections from the container may go. Default `open`.
    #[serde(default)]
    pub egress: Egress,
    /// IPv4 CIDRs whose clients may reach the container's SSH; empty (default): anywhere.
    #[serde(default)]
    pub ssh_from: Vec<String>,
}

/// `open` (anywhere, through the node's NAT), `none` (nowhere: an exam), or `{"allow": [...]}`
/// with entries `CIDR` or `CIDR:PORT` (e.g. only the campus package mirror).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    #[default]
    Open,
    None,
    Allow(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cores: u32,
    pub memory_bytes: u64,
    /// Free and total bytes of the LXD storage pool's backing filesystem.
    pub disk_free_bytes: u64,
    pub disk_total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LxdFacts {
    /// The daemon the node runs: `lxd` or `incus` (absent from agents before Incus: `lxd`).
    #[serde(default = "default_daemon")]
    pub daemon: String,
    pub version: String,
    pub project: String,
    pub storage_pool: String,
    pub storage_driver: String,
    /// The storage pool's used and total bytes as LXD reports them
    /// (`GET /1.0/storage-pools/<pool>/resources`): what placement keeps from filling up.
    #[serde(default)]
    pub pool_used_bytes: u64,
    #[serde(default)]
    pub pool_total_bytes: u64,
}

/// GPUs seen through NVML. When NVML cannot be loaded, `gpus` is empty and `unavailable` says why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuInventory {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    pub gpus: Vec<Gpu>,
    /// Each container's use of these GPUs, from its attributed processes (issue 43): what the
    /// controller's GPU-time accounting and idle detection read.
    #[serde(default)]
    pub instances: Vec<InstanceGpuUse>,
}

/// One container's use of the node's GPUs, summed from the processes attributed to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGpuUse {
    pub instance: String,
    /// The GPUs its processes run on.
    pub gpus: Vec<InstanceGpu>,
}

/// One container's use of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceGpu {
    pub uuid: String,
    /// Its share of the GPU's time, 0 to 100: the GPU's own utilisation when its processes are
    /// the GPU's only ones, else their per-process SM utilisation summed; `None` when NVML gives
    /// neither.
    pub utilization_percent: Option<u32>,
    /// GPU memory its processes hold.
    pub memory_used_bytes: u64,
    /// Its compute processes; each holds a CUDA context.
    pub processes: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub uuid: String,
    pub index: u32,
    pub name: String,
    pub memory_total_bytes: u64,
    pub memory_used_bytes: u64,
    /// PCI bus id as LXD's `pci` device key takes it, e.g. `0000:3b:00.0`.
    pub pci_address: String,
    pub utilization_percent: Option<u32>,
    pub mig_enabled: bool,
    /// MIG instances; each is a GPU of its own to the scheduler (exclusive).
    pub mig_devices: Vec<MigDevice>,
    /// Core temperature in degrees Celsius, when NVML reports it.
    #[serde(default)]
    pub temperature_celsius: Option<u32>,
    /// Power draw in milliwatts, when NVML reports it.
    #[serde(default)]
    pub power_milliwatts: Option<u32>,
    /// Compute processes on this GPU (`nvmlDeviceGetComputeRunningProcesses`), each attributed
    /// to the instance whose cgroup holds it.
    #[serde(default)]
    pub processes: Vec<GpuProcess>,
}

/// One compute process NVML reports on a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuProcess {
    /// Host PID.
    pub pid: u32,
    /// GPU memory it holds, when NVML knows.
    pub used_memory_bytes: Option<u64>,
    /// The instance (of this agent's LXD project) whose cgroup holds the process; `None` for a
    /// process on the host or in another project.
    pub instance: Option<String>,
    /// Its SM utilisation in percent (`nvmlDeviceGetProcessUtilization`), when NVML samples per
    /// process; 0 for a process NVML sampled none of (it reports only processes above 0 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_percent: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    pub uuid: String,
    pub index: u32,
    pub name: String,
    pub memory_total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Image {
    pub fingerprint: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub size_bytes: u64,
    /// From the image property `cohort.gpu_ready`.
    pub gpu_ready: bool,
}

/// `POST /v1/images` with a JSON body: fetch the tarball from a URL (the controller's image store).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportImage {
    pub url: String,
    pub alias: String,
    /// Expected SHA-256 of the tarball; the import fails when it differs.
    pub fingerprint: String,
}

/// Everything the agent needs to make one student's container. Creating is idempotent on
/// `idempotency_key` (the controller uses the operation item id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInstance {
    pub idempotency_key: String,
    pub name: String,
    pub source: InstanceSource,
    pub limits: Limits,
    #[serde(default)]
    pub gpus: Vec<GpuAttachment>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshAccess>,
    /// Custom storage volume (created if missing, kept on delete) mounted at `/home/<user>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_volume: Option<String>,
    /// The home volume's size in MiB (LXD's `size` on the volume: a quota on the pool), applied
    /// to a volume that exists too. None: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_mib: Option<u64>,
    /// The home volume's snapshot schedule (its course's `home_snapshots`), applied to a volume
    /// that exists too. None: no scheduled snapshots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_snapshots: Option<HomeSnapshots>,
    /// Extra instance config. Only `user.*` keys and a short allow-list pass; `security.*`,
    /// `raw.*` and unknown keys are refused with a 400 naming the key.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Start the container once created (and wait for sshd when `ssh` is set).
    #[serde(default = "default_true")]
    pub start: bool,
    /// The course's network policy (default: open, SSH from anywhere). Not part of the spec: a
    /// create that finds the instance applies the policy it carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<NetworkPolicy>,
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum InstanceSource {
    /// An image alias or fingerprint in the agent's LXD.
    Image { alias: String },
    /// Copy of a stopped template container in the same project.
    Copy { template: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// `limits.cpu`: number of cores.
    pub cpu: u32,
    /// `limits.memory` in MiB.
    pub memory_mib: u64,
    /// Root disk `size` in GiB.
    pub disk_gib: u64,
}

/// New cores and memory for an instance (its course's limits changed): LXD applies them to a
/// running container's cgroup at once and keeps them for its next start. The root disk is not
/// among them: it keeps the size it was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LiveLimits {
    /// `limits.cpu`: cores, 1 to 1024.
    pub cpu: u32,
    /// `limits.memory` in MiB, at least 64.
    pub memory_mib: u64,
}

/// The GPUs an instance holds now, given back to it after they were released (an idle stop, a
/// detach): they replace its `cohort-gpu*` devices. The controller sends them only while the
/// instance is stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachGpus {
    pub gpus: Vec<GpuAttachment>,
}

/// What an instance imported from another node's backup takes of its new node: the SSH
/// forward on this node's address and the port the controller allocated here, and the GPUs it
/// holds here (none: its `cohort-gpu*` devices go). Its NIC, isolated id range and pools are
/// the agent's own to choose. Sent only while the instance is stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Arrival {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<SshAccess>,
    #[serde(default)]
    pub gpus: Vec<GpuAttachment>,
}

/// One allocated GPU: pinned by PCI address, or by MIG uuid for a MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuAttachment {
    pub uuid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_uuid: Option<String>,
    /// On a GPU shared with other containers: the most GPU memory each process in this one may
    /// allocate through libcuda (the cap the agent installs; see docs/gpus.md). None: no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cap_bytes: Option<u64>,
}

/// The student's login inside the container and the host port that reaches its sshd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SshAccess {
    pub username: String,
    /// OpenSSH public keys, one per entry (validated: ed25519, ecdsa, rsa >= 2048, no options).
    #[serde(default)]
    pub authorized_keys: Vec<String>,
    /// crypt(3) hash used when there is no key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_hash: Option<String>,
    #[serde(default)]
    pub sudo: bool,
    /// Host address the proxy device listens on (e.g. `127.0.0.1` or the node's public address).
    pub listen_address: String,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Instance {
    pub name: String,
    /// LXD's status: `Running`, `Stopped`, `Frozen`, `Error`, ...
    pub status: String,
    pub idempotency_key: Option<String>,
    pub limits: Option<Limits>,
    pub gpus: Vec<GpuAttachment>,
    pub ssh_port: Option<u16>,
    pub ssh_listen: Option<String>,
    /// The container's static address on the node network; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The public half of the SSH host key the agent wrote before the first boot
    /// (`ssh-ed25519 AAAA... root@name`); absent for an instance made without SSH access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_host_key: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    /// True when sshd answered on the forwarded port at the time of the call.
    pub ssh_ready: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<InstanceState>,
    /// The full LXD config (`config` of the instance), for `cohort config show`.
    pub config: BTreeMap<String, String>,
    pub devices: BTreeMap<String, BTreeMap<String, String>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceState {
    pub processes: i64,
    pub cpu_usage_ns: u64,
    pub memory_bytes: u64,
    pub disk_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateAction {
    Start,
    Stop,
    Restart,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateChange {
    pub action: StateAction,
    /// Seconds to wait for a clean shutdown before forcing (stop, restart). Default 30.
    #[serde(default)]
    pub timeout_s: Option<u32>,
    #[serde(default)]
    pub force: bool,
}

/// Non-interactive exec: the command runs to completion and its output comes back whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    pub command: Vec<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub user: Option<u32>,
    #[serde(default)]
    pub group: Option<u32>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Bytes fed to the command's stdin, base64.
    #[serde(default)]
    pub stdin_base64: Option<String>,
    /// Seconds before the command is given up on. Default 300.
    #[serde(default)]
    pub timeout_s: Option<u32>,
}

impl ExecRequest {
    /// `command` as root in the container's working directory: no environment, no stdin, the
    /// default timeout. Callers set the rest by struct update.
    pub fn new(command: Vec<String>) -> Self {
        ExecRequest {
            command,
            environment: BTreeMap::new(),
            user: None,
            group: None,
            cwd: None,
            stdin_base64: None,
            timeout_s: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecResult {
    pub exit_code: i32,
    /// Output as base64, since a command may print anything.
    pub stdout_base64: String,
    pub stderr_base64: String,
}

/// An exec whose streams the caller attaches to over websockets (LXD's `wait-for-websocket`):
/// interactive with a terminal of `width` x `height`, or stdin, stdout and stderr apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecSessionRequest {
    pub command: Vec<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    #[serde(default)]
    pub interactive: bool,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    #[serde(default)]
    pub user: Option<u32>,
    #[serde(default)]
    pub group: Option<u32>,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// A started exec session: the node's LXD operation and the secret of each of its websockets
/// (`0`, `1`, `2`, `control`), to be attached within LXD's five seconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecSession {
    pub operation: String,
    pub fds: BTreeMap<String, String>,
}

/// Where an exec session is: still running, or ended with the command's exit code (or LXD's
/// error when it never ran).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecSessionState {
    pub finished: bool,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSnapshot {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Snapshot {
    pub name: String,
    pub created_at: Option<DateTime<Utc>>,
    pub stateful: bool,
}

/// `PATCH /v1/instances/{name}`: live changes, applied in one LXD call. Config keys follow the
/// create allow-list (`validate::config_key`); devices are `disk` or `proxy`
/// (`validate::device`); Cohort's own devices (root, `cohort-*`) are neither added nor removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateInstance {
    /// Keys to set.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Keys to remove.
    #[serde(default)]
    pub unset: Vec<String>,
    /// Devices to add, by name.
    #[serde(default)]
    pub add_devices: BTreeMap<String, BTreeMap<String, String>>,
    /// Devices to remove, by name.
    #[serde(default)]
    pub remove_devices: Vec<String>,
    /// Whether a disk may mount a host path (the controller sets it for admins only).
    #[serde(default)]
    pub allow_host_path: bool,
}

/// `POST /v1/instances/{name}/publish`: the stopped instance becomes an image whose unified
/// tarball is the answer (`application/octet-stream`, its SHA-256 in `X-Cohort-Fingerprint`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishInstance {
    /// Alias given to the image on the node when it is kept.
    #[serde(default)]
    pub alias: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Keep the image in the node's LXD (default: deleted once exported).
    #[serde(default)]
    pub keep: bool,
}

fn default_daemon() -> String {
    "lxd".into()
}

/// `POST /v1/datasets`: fetch a dataset tarball from the controller's data store into the
/// custom volume `volume` (made once; an existing volume is the dataset already here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportDataset {
    pub url: String,
    /// Expected SHA-256 of the tarball; the import fails when it differs.
    pub sha256: String,
    /// `dataset-<hex>`.
    pub volume: String,
}

/// One dataset as an instance mounts it: the volume at `/data/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DatasetMount {
    pub name: String,
    pub volume: String,
    /// Read-write (staff); otherwise read-only.
    pub writable: bool,
}

/// `PUT /v1/instances/{name}/datasets`: every dataset the instance mounts; its other
/// dataset devices go, in the same change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceDatasets {
    pub mounts: Vec<DatasetMount>,
}

/// `POST /v1/datasets/prune`: delete the node's dataset volumes not in `keep` that no
/// instance mounts; answers the volumes deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PruneDatasets {
    pub keep: Vec<String>,
}

/// How often the daemon snapshots a home volume: a course's `home_snapshots` but `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "diesel",
    derive(diesel::AsExpression, diesel::FromSqlRow),
    diesel(sql_type = diesel::sql_types::Text)
)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotEvery {
    Daily,
    Hourly,
}

crate::named_enum!(SnapshotEvery, "a snapshot schedule" {
    Daily => "daily",
    Hourly => "hourly",
});

/// A home volume's snapshots as its daemon makes them: one `every` day or hour, each expiring
/// after `keep` such periods, so the daemon keeps about the last `keep`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeSnapshots {
    pub every: SnapshotEvery,
    /// 1 to 100.
    pub keep: u32,
}

/// `PUT /v1/volumes/{name}/snapshot-schedule`: the home volume's schedule; `None` stops the
/// scheduled snapshots (those made stay until their own expiry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeSnapshotSchedule {
    #[serde(default)]
    pub schedule: Option<HomeSnapshots>,
}

/// One snapshot of a home volume, scheduled (`auto<N>`) or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HomeSnapshot {
    pub name: String,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    /// When the daemon deletes it (the course's `home_snapshots_keep` periods after it was made).
    #[serde(default)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// `POST /v1/instances/{name}/home/restore`: the instance's home volume back to one of its
/// snapshots, whole. The daemon refuses to restore a volume a running container uses, so the
/// agent stops a running one first and starts it again after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreHome {
    pub volume: String,
    pub snapshot: String,
}

/// `POST /v1/instances/{name}/home/restore-path`: one file or directory of a home snapshot
/// (`path`, relative to the home) copied into `~/restored/<snapshot>/<path>`, owned by the
/// home's owner, while the container runs. With `check`, only whether it can be: the snapshot
/// and the path exist and the path leads through no link (204), else a 4xx naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestoreHomePath {
    pub volume: String,
    pub snapshot: String,
    pub path: String,
    #[serde(default)]
    pub check: bool,
}
