//! The processes of one exec, found on the host by a tag in their environment and killed when
//! the exec times out. LXD 5.0 cannot cancel a non-interactive exec (its operation has
//! `may_cancel: false`) and gives it no process group of its own inside the container, so the
//! command and every child it started (which inherit the environment) are found through the
//! host's `/proc`, where the agent sees every container's processes.

use std::time::Duration;

use cohort_proto::validate::EXEC_TAG_VAR;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Rounds of search and kill: a child forked while the last round ran is found by the next.
const ROUNDS: usize = 5;

/// Pids on this host whose environment holds `COHORT_EXEC=<tag>`.
fn tagged(tag: &str) -> Vec<i32> {
    let wanted = format!("{EXEC_TAG_VAR}={tag}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == wanted.as_bytes()))
        })
        .collect()
}

/// Kills every process of the exec tagged `tag`; returns how many were signalled.
pub async fn kill_tagged(tag: &str) -> usize {
    let mut killed = 0;
    for _ in 0..ROUNDS {
        let pids = tagged(tag);
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            // A process that ended in between is already what was wanted.
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    killed
}
