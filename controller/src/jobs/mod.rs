//! The job system. A long action is a durable operation of items, one step each, recorded by
//! [`enqueue`] in the caller's transaction with its audit row. The [`worker`] claims operations
//! under a lease and runs their items through [`step`], one file per step below
//! ([`failed_create`] releases what a create that failed for good held; [`logins`] holds the
//! agent calls that change logins); the [`crate::placement::queue`] places instances nothing
//! could hold when they were asked for.
//!
//! Requests never call a node's agent to do an operation's work: they record the intent (and
//! the placement), and the worker does the node work. A request calls an agent only for
//! interactive I/O (exec, files, snapshots, live config); a course's network policy and a
//! person's logins reach their containers as [`access`] steps, an orphan's delete as an
//! [`orphans`] step and a deleted image's node copies as [`drop_image`] steps, retried like
//! any other, and a request that answers with their effect waits a while for them ([`settle`]).

pub mod access;
pub mod archive;
pub mod create;
pub mod delete;
pub mod drop_image;
pub mod enqueue;
pub mod failed_create;
pub mod gpus;
pub mod home_snapshots;
pub mod import_image;
pub mod logins;
pub mod moves;
pub mod operations;
pub mod orphans;
pub mod outcome;
pub mod payload;
pub mod publish;
pub mod reset;
pub mod resize;
pub mod settle;
pub mod state;
pub mod step;
pub mod sync_data;
pub mod worker;

pub use crate::db::enums::StepKind;
pub use enqueue::{enqueue, enqueue_each, Audit, Step};
pub use outcome::StepOutcome;
pub use payload::Job;
