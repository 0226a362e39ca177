//! What the controller does, one function per request, apart from HTTP: each takes the
//! [`crate::controller::Controller`], the [`crate::auth::Caller`] and a `cohort_proto` request,
//! checks the caller's rights, changes the database in one transaction with its audit row, and
//! answers a `cohort_proto` type. Handlers only parse and call these.

pub mod accounts;
pub mod audit;
pub mod enroll;
pub mod gpus;
pub mod image_distribution;
pub mod images;
pub mod instance_io;
pub mod instances;
pub mod lxd_trust;
pub mod metrics;
pub mod moves;
pub mod nodes;
pub mod operations;
pub mod orphans;
pub mod roles;
pub mod sign_in;
pub mod tokens;
pub mod users;
