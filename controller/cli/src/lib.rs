//! `cohort`, an lxc-compatible command line for a Cohort GPU lab: clap structs in [`args`], one
//! runner per verb in [`commands`], and the pieces they share (remotes in [`config`], pinned TLS
//! in [`tls`], lxc's output formats in [`render`]).

pub mod args;
pub mod config;
pub mod render;
pub mod tls;
