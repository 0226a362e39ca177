//! Cohort's controller: the REST API, the PostgreSQL inventory, the CA and node enrollment,
//! placement and the job worker that carries out durable operations.

pub mod agent_client;
pub mod auth;
pub mod config;
pub mod db;
pub mod error;
pub mod models;
pub mod pki;
pub mod validate;
