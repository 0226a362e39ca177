//! Instances: create, list, get, state changes and delete ([`manage`]), the calls passed
//! through to the agent ([`io`]), moves ([`moves`]), who may set snapshot keys
//! ([`snapshot_policy`]), orphans ([`orphans`]) and the cached pages of `GET /instances`
//! ([`page_cache`]).

pub mod io;
pub mod manage;
pub mod moves;
pub mod orphans;
pub mod page_cache;
pub mod snapshot_policy;
