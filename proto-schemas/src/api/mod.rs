//! The public REST API under `/api/v1`: one file per resource, requests and responses only.
//! Every asynchronous action answers `202 Accepted` with an [`operations::Operation`]; lists are
//! plain JSON arrays; errors are [`crate::ErrorBody`].

pub mod audit;
pub mod batch_jobs;
pub mod course_archives;
pub mod course_data;
pub mod courses;
pub mod gpu_leases;
pub mod gpus;
pub mod images;
pub mod instances;
pub mod lxd_trust;
pub mod nodes;
pub mod operations;
pub mod orphans;
pub mod usage;
pub mod users;
