//! The running controller: its shared state ([`state::Controller`]), configuration, the
//! `serve` wiring ([`server`]), backup and restore, its health, Prometheus metrics and who may
//! read them, the watch over the background loops ([`loops`]), the C allocator's setting
//! ([`malloc`]),
//! and the background rounds (the node [`poller`], certificate [`renewal`], the [`prune`]r, and the
//! [`fixed_rate`] beat they run on).

pub mod backup;
pub mod config;
pub mod fixed_rate;
pub mod gpu_time;
pub mod health;
pub mod loops;
pub mod malloc;
pub mod metrics;
pub mod metrics_access;
pub mod poller;
pub mod prune;
pub mod renewal;
pub mod server;
pub mod state;
