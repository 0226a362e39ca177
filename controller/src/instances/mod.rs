//! Instances: create, list, get, state changes and delete ([`manage`]), the calls passed
//! through to the agent ([`io`]), moves ([`moves`]), who may set snapshot keys
//! ([`snapshot_policy`]), orphans ([`orphans`]), the cached pages of `GET /instances`
//! ([`page_cache`]) and who may open a container's JupyterLab, with its tickets and passes
//! ([`notebook`]).

pub mod home;
pub mod io;
pub mod lxd_live;
pub mod manage;
pub mod moves;
pub mod notebook;
pub mod orphans;
pub mod page_cache;
pub mod snapshot_policy;
