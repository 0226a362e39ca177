//! A small LXD client over the daemon's unix socket (hyper + hyperlocal): the response envelope,
//! operations, and the calls the agent makes, every one scoped to one LXD project.

mod client;
mod envelope;
pub mod networks;
pub mod server;

pub use client::{encode, Lxd, RawFile, RawStream};
pub use envelope::LxdError;
