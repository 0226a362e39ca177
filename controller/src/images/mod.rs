//! Images: the template catalog ([`catalog`]), the check that an upload is an LXD image
//! ([`format`]) and distributing one to nodes ahead of a class ([`distribution`]). Publishing an
//! instance as an image is a job step (`crate::jobs::publish`).

pub mod catalog;
pub mod distribution;
pub mod format;
