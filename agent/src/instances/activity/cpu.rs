//! A container's processes above a CPU threshold: every host process in the PID namespace of
//! the container's init, its CPU time read twice from `/proc/<pid>/stat` a short sample apart.
//! A compile or a training loop on the CPU is use; an idle shell, sshd or JupyterLab answering
//! a tab's polling stays far below any sensible threshold.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cohort_proto::activity::BusyProcess;

/// How long the agent watches the processes: long enough that a busy loop shows, short enough
/// for the reclaimer to wait for.
pub const SAMPLE: Duration = Duration::from_secs(1);

/// One reading: per PID, its command and CPU time in clock ticks.
type Reading = HashMap<u32, (String, u64)>;

/// The container's processes at `cpu_percent` percent of one core or more over [`SAMPLE`].
pub async fn busy_processes(init: PathBuf, cpu_percent: u32) -> Vec<BusyProcess> {
    let read = |init: PathBuf| tokio::task::spawn_blocking(move || reading(&init));
    let started = Instant::now();
    let Ok(first) = read(init.clone()).await else {
        return Vec::new();
    };
    tokio::time::sleep(SAMPLE).await;
    let Ok(second) = read(init).await else {
        return Vec::new();
    };
    busy(
        &first,
        &second,
        started.elapsed(),
        ticks_per_second(),
        cpu_percent,
    )
}

/// The processes whose CPU time grew by `cpu_percent` of `elapsed` or more between readings.
fn busy(
    first: &Reading,
    second: &Reading,
    elapsed: Duration,
    ticks_per_s: u64,
    cpu_percent: u32,
) -> Vec<BusyProcess> {
    let elapsed_ticks = (elapsed.as_secs_f64() * ticks_per_s as f64).max(1.0);
    let mut out: Vec<BusyProcess> = second
        .iter()
        .filter_map(|(pid, (command, after))| {
            let (_, before) = first.get(pid)?;
            let share = after.saturating_sub(*before) as f64 * 100.0 / elapsed_ticks;
            (share >= f64::from(cpu_percent)).then(|| BusyProcess {
                pid: *pid,
                command: command.clone(),
                cpu_percent: share.round() as u32,
            })
        })
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(p.cpu_percent));
    out
}

fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
        .unwrap_or(100)
}

/// Every process in the PID namespace of the container's init (`init` is its `/proc/<pid>`).
fn reading(init: &Path) -> Reading {
    let Ok(ns) = std::fs::read_link(init.join("ns/pid")) else {
        return Reading::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Reading::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let dir = e.path();
            if std::fs::read_link(dir.join("ns/pid")).ok()? != ns {
                return None;
            }
            let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
            Some((pid, cpu_time(&stat)?))
        })
        .collect()
}

/// The command and user+system CPU time (clock ticks) of one `/proc/<pid>/stat` line.
fn cpu_time(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let command = stat.get(open + 1..close)?.to_string();
    // After the command: state (field 3) ... utime (14), stime (15).
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((command, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_stat_line_whose_command_has_spaces_and_parentheses() {
        let line = "4242 (cc1 (x) y) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0 100 0 0";
        assert_eq!(cpu_time(line), Some(("cc1 (x) y".into(), 300)));
        assert_eq!(cpu_time("garbage"), None);
    }

    #[test]
    fn counts_a_process_busy_at_the_threshold_and_not_below() {
        let first = Reading::from([(1, ("sshd".into(), 10)), (2, ("cc1".into(), 100))]);
        let second = Reading::from([
            (1, ("sshd".into(), 11)),
            (2, ("cc1".into(), 190)),
            (3, ("new".into(), 500)),
        ]);
        let busy = busy(&first, &second, Duration::from_secs(1), 100, 10);
        assert_eq!(
            busy,
            vec![BusyProcess {
                pid: 2,
                command: "cc1".into(),
                cpu_percent: 90
            }]
        );
    }

    #[test]
    fn sees_this_process_spinning() {
        let me = PathBuf::from(format!("/proc/{}", std::process::id()));
        let first = reading(&me);
        assert!(first.contains_key(&std::process::id()), "this process");
        let started = Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(600) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let second = reading(&me);
        let busy = busy(&first, &second, started.elapsed(), ticks_per_second(), 10);
        assert!(busy.iter().any(|p| p.pid == std::process::id()), "{busy:?}");
    }
}
