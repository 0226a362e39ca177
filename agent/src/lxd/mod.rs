//! A small client for LXD or Incus over the daemon's unix socket (hyper + hyperlocal): the
//! response envelope, operations, and the calls the agent makes, every one scoped to one project.
//! What differs between the two daemons is decided in one place, [`daemon`].

pub mod backups;
mod client;
pub mod daemon;
mod envelope;
pub mod networks;
pub mod server;
mod websocket;

pub use client::{encode, file_body, full, Lxd, LxdBody, RawFile, RawStream};
pub use daemon::{Daemon, DaemonKind};
pub use envelope::LxdError;
pub use websocket::OperationSocket;
