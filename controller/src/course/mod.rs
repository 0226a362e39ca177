//! Courses: rosters, instance naming, endpoint exports and first-login passwords. The database
//! side and provisioning live with the inventory and the job worker.

pub mod endpoints;
pub mod naming;
pub mod password;
pub mod reserved;
pub mod roster;
