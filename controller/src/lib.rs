//! Cohort's controller: the REST API, the PostgreSQL inventory, the CA and node enrollment,
//! placement and the job worker that carries out durable operations.

pub mod db;
pub mod models;
