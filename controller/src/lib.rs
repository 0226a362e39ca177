//! Cohort's controller: the REST API, the PostgreSQL inventory, the CA and node enrollment,
//! placement and the job worker that carries out durable operations.

pub mod actions;
pub mod agent_client;
pub mod api;
pub mod auth;
pub mod auth_failures;
pub mod backup;
pub mod config;
pub mod controller;
pub mod course;
pub mod db;
pub mod error;
pub mod failed_create;
pub mod feasible;
pub mod gpu_slots;
pub mod image_format;
pub mod lxd_api;
pub mod metrics;
pub mod models;
pub mod openapi;
pub mod page_cache;
pub mod pki;
pub mod placement;
pub mod poller;
pub mod processes;
pub mod queue;
pub mod queue_reason;
pub mod reclaim;
pub mod server;
pub mod snapshot_policy;
pub mod steps;
pub mod validate;
pub mod views;
pub mod worker;
