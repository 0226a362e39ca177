//! `cohort`, an lxc-compatible command line for a Cohort GPU lab: clap structs in [`args`], one
//! runner per verb in [`commands`], and the pieces they share: remotes in [`config`], the REST
//! client in [`client`] with pinned TLS from [`tls`], lxc's output formats in [`render`] and
//! [`columns`], operation progress in [`progress`], sizes in [`units`].

pub mod args;
pub mod client;
pub mod columns;
pub mod commands;
pub mod config;
pub mod progress;
pub mod render;
pub mod tls;
pub mod units;
