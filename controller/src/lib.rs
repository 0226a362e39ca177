//! Cohort's controller: the REST API, the PostgreSQL inventory, the CA and node enrollment,
//! placement and the job worker that carries out durable operations.
//!
//! One folder per feature: [`accounts`], [`courses`], [`instances`], [`images`], [`nodes`],
//! [`placement`], [`reclaim`] and the [`jobs`] system; [`app`] is the running controller (its
//! state, configuration, `serve` and background rounds), [`http`] everything that speaks HTTP,
//! [`db`] the inventory (the only place that names a table), [`agent_client`] the controller's
//! side of the agent API. A feature's requests each take the [`app::state::Controller`], the
//! [`accounts::auth::Caller`] and a `cohort_proto` request, check the caller's rights, change
//! the database in one transaction with its audit row, and answer a `cohort_proto` type;
//! handlers only parse and call these.

pub mod accounts;
pub mod agent_client;
pub mod app;
pub mod audit;
pub mod batch;
pub mod courses;
pub mod db;
pub mod error;
pub mod http;
pub mod images;
pub mod instances;
pub mod jobs;
pub mod nodes;
pub mod placement;
pub mod reclaim;
pub mod usage;
pub mod validate;
pub mod views;
