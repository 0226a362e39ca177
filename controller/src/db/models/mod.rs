//! One model per table: the row types and the queries on them, each returning `QueryResult`.
//! Wire types are built from these in `crate::views`, never serialized directly.

pub mod api_token;
pub mod audit;
pub mod batch_job;
pub mod course;
pub mod course_archive;
pub mod course_budget;
pub mod course_dataset;
pub mod course_home_snapshots;
pub mod course_network;
pub mod course_reclaim;
pub mod course_staff;
pub mod enrollment;
pub mod gpu;
pub mod gpu_allocation;
pub mod gpu_lease;
pub mod image;
pub mod instance;
pub mod instance_activity;
pub mod instance_usage;
pub mod join_token;
pub mod kept_home;
pub mod lxd_trust;
pub mod node;
pub mod node_certificate;
pub mod notebook_pass;
pub mod operation;
pub mod operation_item;
pub mod orphan;
pub mod portal_session;
pub mod reclaim_warning;
pub mod sign_in_password;
pub mod ssh_key;
pub mod user;
