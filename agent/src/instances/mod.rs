//! The containers the agent makes and drives, verbs only: create (from an image or a template
//! copy, with limits, GPUs, SSH and a home volume), lifecycle, exec, files, snapshots, transfer,
//! the instance side of the node network. All are methods of [`Instances`] (`service`), which
//! holds the services they use; what goes inside a container is `guest`, ids are `idmap`.

pub mod activity;
mod arrival;
mod create;
pub mod datasets;
mod error;
mod exec;
mod exec_session;
mod exec_tag;
mod file_mode;
mod files;
mod first_start;
mod home_archive;
mod home_restore_path;
mod home_snapshots;
mod host_path;
mod in_flight;
mod lifecycle;
mod limits;
mod nic;
mod publish;
mod service;
mod snapshot_room;
mod snapshots;
pub mod spec;
pub mod ssh;
mod transfer;
mod update;
mod view;
mod volumes;

pub use error::InstanceError;
pub use exec::ExecStreams;
pub use exec_session::ExecSessions;
pub use files::{FileContent, FileStream};
pub use home_archive::ArchiveStream;
pub use in_flight::InFlight;
pub use publish::Published;
pub use service::Instances;
pub use transfer::{streamed, Export};
pub(crate) use view::LxdInstance;

/// Instance config keys where the agent records what it was asked, so the controller keeps no
/// LXD state: the idempotency key, a hash of the spec, the SSH user and the GPU attachments.
pub const KEY_IDEMPOTENCY: &str = "user.cohort.idempotency_key";
pub const KEY_SPEC: &str = "user.cohort.spec";
pub const KEY_SSH_USER: &str = "user.cohort.ssh_user";
pub const KEY_GPUS: &str = "user.cohort.gpus";
/// The public half of the SSH host key the agent wrote into the container (`guest::host_key`).
pub const KEY_SSH_HOST_KEY: &str = "user.cohort.ssh_host_key";
/// The root disk's quota while it waits for the shift before the first start (`create`).
pub const KEY_ROOT_SIZE: &str = "user.cohort.root_size";

/// Device names the agent owns.
pub const DEVICE_SSH: &str = "cohort-ssh";
pub const DEVICE_HOME: &str = "cohort-home";
pub const DEVICE_GPU_PREFIX: &str = "cohort-gpu";

/// Refuses a name LXD would refuse, before any call.
pub(crate) fn check_name(name: &str) -> Result<(), InstanceError> {
    cohort_proto::validate::instance_name(name).map_err(|e| InstanceError::invalid("name", e.0))
}
