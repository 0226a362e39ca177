//! The e2e tests that disturb what every other test shares, in one binary whose tests run one at a
//! time: each takes [`alone`] (or [`alone_blocking`]) first, since `cargo test --workspace` gives
//! every test binary the same arguments and `--test-threads=1` cannot be asked of this one alone.
//! Cargo runs test binaries one after the other, so none of these overlaps a test of `it` either.
//!
//! Why each is here:
//! - `node_reboot`: shuts down the host's LXD daemon, stopping every test's containers.
//! - `faults`: each fault fills the machine with a course of systemd containers, and its timings
//!   hold only when it runs alone.
//! - `db_faults`: mounts a small loop filesystem for a private PostgreSQL and fills it.
//! - `move_faults`: partitions a lab node in the middle of a move's copy; heavy (two daemons).
//! - `packages`: the `.deb`s under systemd, with service start bounds for an otherwise idle host.
//! - `cli_format`, `config_env`, `observe_agent`, `observe_reclaim`, `portal_admin`, `hostile_student_lxd`:
//!   set process environment variables (`FAKE_NVML_PROCESSES`, `COHORT_AGENT_NVML_LIBRARY`,
//!   `COHORT_RECLAIM_*`, `COHORT_AGENT_MAX_SNAPSHOTS`) that every agent or controller started
//!   afterwards in this process inherits.
//! - `link_faults`: partitions a lab node with nftables, sets `FAKE_NVML_HANG_FILE`, and times
//!   sign-ins and a slow link that hold only on an otherwise quiet machine.
//! - `two_controllers`: a second controller process on the lab's database beside its own, both
//!   polling every second through a provision, a move and a renewal; heavy (two daemons).
//! - `controller_gpus`: loads the test NVML library in this process after setting
//!   `FAKE_NVML_ALL_MIG`, and reads `FAKE_NVML_PROCESSES` as the others leave it.
//! - `pylxd_suite`: pylxd's own integration suite imports an image and makes a container in
//!   most of its 68 tests, four minutes of load that starved the parallel tests' nodes.
//! - `gpu_budget`: sets `FAKE_NVML_*` and `COHORT_AGENT_NVML_LIBRARY` for its agents, as
//!   `gpu_usage` does.

use std::ffi::OsString;

#[path = "../it/cli_support.rs"]
mod cli_support;

mod batch_gpu_jobs;
mod cli_format;
mod config_env;
mod controller_gpus;
mod course_data_memory;
mod db_faults;
mod faults;
mod gpu_budget;
mod gpu_memory;
mod gpu_on_demand;
mod gpu_usage;
mod hostile_student_lxd;
mod link_faults;
mod move_faults;
mod node_reboot;
mod observe_agent;
mod observe_reclaim;
mod packages;
mod portal_admin;
mod portal_readable;
mod pylxd_suite;
mod two_controllers;

/// One serial test at a time, across every runtime of this process.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A serial test's turn: while held no other test of this binary runs; dropped, it puts the
/// process environment back as it found it, so what one test set does not reach the next.
pub struct Alone {
    env: Vec<(OsString, OsString)>,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

/// Waits for this test's turn (for async tests).
pub async fn alone() -> Alone {
    let turn = TURN.lock().await;
    Alone {
        env: std::env::vars_os().collect(),
        _turn: turn,
    }
}

/// Waits for this test's turn (for tests outside a runtime).
pub fn alone_blocking() -> Alone {
    let turn = TURN.blocking_lock();
    Alone {
        env: std::env::vars_os().collect(),
        _turn: turn,
    }
}

impl Drop for Alone {
    fn drop(&mut self) {
        for (key, _) in std::env::vars_os() {
            if !self.env.iter().any(|(k, _)| *k == key) {
                std::env::remove_var(key);
            }
        }
        for (key, value) in &self.env {
            if std::env::var_os(key).as_ref() != Some(value) {
                std::env::set_var(key, value);
            }
        }
    }
}
