//! Each container's ids on the host: its isolated range, picked by the agent (`ranges`); the
//! shift of a new container's files into that range before its first start (`shift`), where LXD
//! would do it on the start (`probe` finds out whether it would); and the small files the agent
//! reads and writes in a stopped container's root filesystem from the host (`rootfs`). [`Idmap`]
//! is the service the rest of the agent holds.

pub mod probe;
mod ranges;
pub mod rootfs;
mod service;
pub mod shift;

pub use ranges::{host_range, pick_base, root_range, taken_ranges, SubidRange, RANGE_SIZE};
pub use service::{Idmap, ShiftTotals};
