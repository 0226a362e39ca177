//! The harness every end-to-end test shares: a PostgreSQL database per test ([`TestDb`]), an LXD
//! project per test ([`TestLxd`]), host port ranges no two tests share ([`PortRange`]) and real
//! `ssh` logins with generated keys ([`ssh`]). Each starts from the real daemon set up by
//! `scripts/setup`; a missing daemon is a failure, never a skip.

pub mod agent;
pub mod bodies;
pub mod browser;
pub mod cluster;
pub mod controller;
pub mod cuda;
pub mod db;
pub mod delay_proxy;
pub mod fake_agent;
pub mod gpu_node;
pub mod images;
pub mod lab;
pub mod ldap;
pub mod lxd;
pub mod macvlan;
pub mod network;
pub mod observe;
pub mod pg;
pub mod portal;
pub mod ports;
pub mod process;
pub mod ssh;

pub use db::TestDb;
pub use lxd::TestLxd;
pub use network::TestNetwork;
pub use ports::PortRange;

/// True when no process with this pid is alive: its leftovers may be removed.
pub(crate) fn pid_is_dead(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A name unique to this process and call, e.g. `7421-3`.
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}
