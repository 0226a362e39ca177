//! A container's terminals' last input: the access time of each `/dev/pts/N` in the container's
//! own devpts, read through its init process's root (`/proc/<pid>/root`), as `w` reads a
//! terminal's idle time. The kernel sets a terminal's access time when a program reads input
//! from it (and its modification time on output), so a session printing a long build log is
//! not input, and typing is.

use std::path::Path;
use std::time::SystemTime;

/// Seconds since the most recent input on any of the container's terminals; `None` when it
/// has none (or its devpts cannot be read).
pub fn last_input_age(init: &Path) -> Option<u64> {
    let pts = init.join("root/dev/pts");
    let entries = std::fs::read_dir(pts).ok()?;
    let latest = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_terminal))
        .filter_map(|e| e.metadata().ok()?.accessed().ok())
        .max()?;
    Some(age(latest))
}

/// `/dev/pts/N`; not `ptmx`.
fn is_terminal(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit())
}

/// Whole seconds from `t` to now (0 for a time ahead of the clock).
pub fn age(t: SystemTime) -> u64 {
    SystemTime::now()
        .duration_since(t)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbered_entries_are_terminals() {
        assert!(is_terminal("0") && is_terminal("17"));
        assert!(!is_terminal("ptmx") && !is_terminal(""));
    }

    #[test]
    fn finds_the_latest_access_of_a_devpts_like_directory() {
        let root = tempfile::tempdir().unwrap();
        let pts = root.path().join("root/dev/pts");
        std::fs::create_dir_all(&pts).unwrap();
        assert_eq!(last_input_age(root.path()), None);
        std::fs::write(pts.join("ptmx"), "").unwrap();
        assert_eq!(last_input_age(root.path()), None, "ptmx is no terminal");
        let old = std::fs::File::create(pts.join("0")).unwrap();
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        old.set_times(std::fs::FileTimes::new().set_accessed(hour_ago))
            .unwrap();
        let age_s = last_input_age(root.path()).unwrap();
        assert!((3599..3700).contains(&age_s), "{age_s}");
    }
}
