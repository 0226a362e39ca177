//! A small client for LXD or Incus over the daemon's unix socket (hyper + hyperlocal): the
//! response envelope, operations, and one typed method per LXD call, one file per resource (as
//! LXD's own `client/lxd_*.go`), every call scoped to one project. What differs between the two
//! daemons is decided in one place, [`daemon`].

pub mod backups;
mod client;
pub mod daemon;
mod envelope;
pub mod images;
pub mod instance_exec;
pub mod instance_files;
pub mod instance_snapshots;
pub mod instances;
pub(crate) mod lock;
pub mod networks;
pub mod operations;
pub mod projects;
#[cfg(test)]
pub(crate) mod scripted;
pub mod server;
pub mod storage;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wait_tests;
mod websocket;

/// An instance's (or a volume's, a network's) `config`: LXD keeps every value as a string.
pub type Config = std::collections::BTreeMap<String, String>;
/// One device of an instance: its keys (`type`, `path`, `listen`, ...), all strings.
pub type Device = std::collections::BTreeMap<String, String>;
/// An instance's devices by name.
pub type Devices = std::collections::BTreeMap<String, Device>;

pub use client::{file_body, full, Lxd, LxdBody, RawFile, RawStream};
pub use daemon::{Daemon, DaemonKind};
pub use envelope::LxdError;
pub use websocket::OperationSocket;

/// LXD's Go encodes an empty list or map as `null`, and Incus answers `null` for the whole
/// `config`, `devices` and `state` of an instance it lists in status `Error` while that instance
/// is being created or deleted: read as empty.
pub(crate) fn null_as_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + serde::Deserialize<'de>,
{
    Ok(<Option<T> as serde::Deserialize>::deserialize(d)?.unwrap_or_default())
}
