//! Every type that crosses a wire in Cohort: the public REST API (`api`), the controller<->agent
//! API (`agent`), enrollment (`enroll`) and the one error shape (`error`). Plain serde types and
//! constants, no behaviour; the JSON Schema files in `proto-schemas/schemas/` are generated from
//! them (see `schema`).

pub mod activity;
pub mod agent;
pub mod api;
pub mod enroll;
pub mod error;
pub mod metrics;
pub mod names;
pub mod rfc3339;
pub mod schema;
pub mod validate;

pub use error::{ErrorBody, ErrorDetail};

/// Subject organizational unit of a certificate issued to the controller: the only role an agent
/// accepts as a client.
pub const ROLE_CONTROLLER: &str = "cohort-controller";
/// Subject organizational unit of a certificate issued to a node's agent.
pub const ROLE_NODE: &str = "cohort-node";
