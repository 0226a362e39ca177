//! Courses, in one folder: the requests an instructor makes of a course (create and settings,
//! roster import, provisioning, limits and network policy, per-student actions, teardown,
//! delete, the endpoints export, a new password) and what they are made of (roster parsing,
//! instance naming, endpoint formats, generated passwords). The job steps a course's
//! operations run are in `crate::jobs`.

pub mod archive;
pub mod archive_sweep;
pub mod budget;
pub mod containers;
pub mod copy;
pub mod course;
pub mod data;
pub mod data_tar;
pub mod delete;
pub mod endpoints;
pub mod enrol;
pub mod export;
pub mod home_snapshots;
pub mod limits;
pub mod naming;
pub mod network;
pub mod password;
pub mod provision;
pub mod reissue;
pub mod reserved;
pub mod resize;
pub mod roster;
pub mod staff;
