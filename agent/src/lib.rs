//! Cohort's node agent: drives the local LXD daemon over its unix socket, reports GPUs (NVML) and
//! host facts, and serves the controller over mutual TLS (`cohort_proto::agent`).

pub mod api;
pub mod config;
pub mod doctor;
pub mod doctor_gpus;
pub mod enroll;
pub mod gpu;
pub mod guest;
pub mod host;
pub mod identity;
pub mod idmap;
pub mod images;
pub mod instances;
pub mod lxd;
pub mod network;
pub mod node;
pub mod tls;

pub use config::AgentConfig;
pub use node::Node;
