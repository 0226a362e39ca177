//! Each container's isolated id range, chosen by the agent instead of LXD, and the reservation
//! file that keeps a range from the other creates on the daemon until LXD holds it.
//!
//! LXD 5.0.2 picks an isolated container's range by scanning every container's
//! `volatile.idmap.base`; a container in the middle of being created has none yet, reads as 0,
//! and the new container is given a range below `/etc/subuid`'s, which `newuidmap` refuses at
//! start. Creating and first-starting one container at a time per daemon avoids it, at the cost
//! of serialising every first start (a rootfs remap and a boot). With `security.idmap.base` set,
//! LXD skips the scan and uses the range it is given, so the agent picks a free range under the
//! daemon's lock and reserves it (in a file every agent on the daemon reads), lets go of the
//! lock, and creates and starts in parallel with other creates.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

/// Ids in one isolated container's range: LXD's default `security.idmap.size`.
pub const RANGE_SIZE: u64 = 65536;

/// How long a reservation keeps its range from other creates: far longer than a create takes,
/// so only the reservation of an agent that died mid-create ever lapses.
const RESERVATION_TTL_S: u64 = 600;

pub use crate::lxd::daemon::SubidRange;

/// Root's range in one `/etc/subuid`-style file: the largest `root:START:COUNT` line.
pub fn root_range(text: &str) -> Option<SubidRange> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.trim().split(':');
            if parts.next()? != "root" {
                return None;
            }
            let start = parts.next()?.parse().ok()?;
            let size = parts.next()?.parse().ok()?;
            Some(SubidRange { start, size })
        })
        .max_by_key(|r| r.size)
}

/// The ids both files give root (LXD needs a range valid for users and groups alike).
pub fn host_range(subuid: &Path, subgid: &Path) -> Option<SubidRange> {
    let u = root_range(&std::fs::read_to_string(subuid).ok()?)?;
    let g = root_range(&std::fs::read_to_string(subgid).ok()?)?;
    let start = u.start.max(g.start);
    let end = (u.start + u.size).min(g.start + g.size);
    (end > start).then(|| SubidRange {
        start,
        size: end - start,
    })
}

/// The lowest free range of `RANGE_SIZE` ids in `host`, aligned as LXD aligns its own, after the
/// first `RANGE_SIZE` ids (which unisolated containers share); `taken` holds (base, size) of the
/// ranges other containers hold. `None` when the host range is full.
pub fn pick_base(host: SubidRange, taken: &[(u64, u64)]) -> Option<u64> {
    let end = host.start.checked_add(host.size)?;
    let mut base = host.start + RANGE_SIZE;
    while base + RANGE_SIZE <= end {
        let clash = taken
            .iter()
            .filter(|(b, s)| *b < base + RANGE_SIZE && base < b + s)
            .map(|(b, s)| b + s)
            .max();
        match clash {
            None => return Some(base),
            // Jump past the clash, rounded up to the next aligned slot.
            Some(past) => {
                let slots = (past - host.start).div_ceil(RANGE_SIZE);
                base = host.start + slots * RANGE_SIZE;
            }
        }
    }
    None
}

/// The ranges held by the instances in `listing` (LXD's instances, `recursion=1`, every project):
/// the range LXD recorded at creation, or the one it was told to use.
pub fn taken_ranges(listing: &[Value]) -> Vec<(u64, u64)> {
    listing
        .iter()
        .filter_map(|inst| {
            let config = inst.get("config")?;
            let key = |k: &str| config.get(k).and_then(Value::as_str);
            if key("security.idmap.isolated") != Some("true") {
                return None;
            }
            let base: u64 = key("volatile.idmap.base")
                .or_else(|| key("security.idmap.base"))?
                .parse()
                .ok()?;
            let size = key("security.idmap.size")
                .and_then(|s| s.parse().ok())
                .unwrap_or(RANGE_SIZE);
            (base > 0).then_some((base, size))
        })
        .collect()
}

/// Ranges handed to creates still in flight, one `BASE UNIX_SECONDS` line each, kept beside the
/// daemon's start lock so every agent driving the daemon sees them: a container being created
/// is not yet in LXD's listing, or is there without its range.
pub(super) fn reservations_path(lock: &Path) -> PathBuf {
    lock.with_extension("idmaps")
}

/// The reservations in `text` younger than the TTL at `now`.
pub(super) fn live_reservations(text: &str, now: u64) -> Vec<(u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let (base, at) = line.split_once(' ')?;
            Some((base.parse().ok()?, at.parse().ok()?))
        })
        .filter(|&(_, at): &(u64, u64)| at + RESERVATION_TTL_S > now)
        .collect()
}

pub(super) fn write_reservations(path: &Path, live: &[(u64, u64)]) -> std::io::Result<()> {
    let text: String = live.iter().map(|(b, at)| format!("{b} {at}\n")).collect();
    let tmp = path.with_extension("idmaps.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, path)
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOST: SubidRange = SubidRange {
        start: 100_000,
        size: 10 * RANGE_SIZE + 1,
    };

    #[test]
    fn root_range_is_the_largest_root_line() {
        let text = "_lxd:100000:10000001\nroot:100000:65536\nroot:1000000:1000000000\nbob:1:2\n";
        assert_eq!(
            root_range(text),
            Some(SubidRange {
                start: 1_000_000,
                size: 1_000_000_000
            })
        );
        assert_eq!(root_range("bob:100000:65536\n"), None);
        assert_eq!(root_range("root:x:65536\n"), None);
    }

    #[test]
    fn host_range_is_what_subuid_and_subgid_share() {
        let dir = tempfile::tempdir().unwrap();
        let (u, g) = (dir.path().join("subuid"), dir.path().join("subgid"));
        std::fs::write(&u, "root:100000:1000000\n").unwrap();
        std::fs::write(&g, "root:200000:2000000\n").unwrap();
        assert_eq!(
            host_range(&u, &g),
            Some(SubidRange {
                start: 200_000,
                size: 900_000
            })
        );
        std::fs::write(&g, "root:5000000:10\n").unwrap();
        assert_eq!(host_range(&u, &g), None, "disjoint ranges share nothing");
        assert_eq!(host_range(&u, &dir.path().join("missing")), None);
    }

    #[test]
    fn the_first_free_aligned_slot_after_the_shared_one_is_picked() {
        let slot = |k: u64| HOST.start + k * RANGE_SIZE;
        assert_eq!(pick_base(HOST, &[]), Some(slot(1)));
        assert_eq!(
            pick_base(HOST, &[(slot(1), RANGE_SIZE), (slot(2), RANGE_SIZE)]),
            Some(slot(3))
        );
        // A gap left by a deleted container is reused.
        assert_eq!(
            pick_base(HOST, &[(slot(1), RANGE_SIZE), (slot(3), RANGE_SIZE)]),
            Some(slot(2))
        );
        // A range that is not aligned, or larger than one slot, pushes past its end.
        assert_eq!(
            pick_base(HOST, &[(slot(1) + 10, 2 * RANGE_SIZE)]),
            Some(slot(4))
        );
    }

    #[test]
    fn a_full_range_gives_none() {
        let taken: Vec<_> = (1..10)
            .map(|k| (HOST.start + k * RANGE_SIZE, RANGE_SIZE))
            .collect();
        assert_eq!(pick_base(HOST, &taken), None);
        let tiny = SubidRange {
            start: 100_000,
            size: RANGE_SIZE,
        };
        assert_eq!(pick_base(tiny, &[]), None);
    }

    #[test]
    fn reservations_lapse_after_their_ttl_and_survive_a_round_trip() {
        let now = 1_000_000;
        let text = format!(
            "165536 {}\n231072 {}\ngarbage\n296608 {}\n",
            now - 5,
            now - RESERVATION_TTL_S,
            now
        );
        assert_eq!(
            live_reservations(&text, now),
            vec![(165_536, now - 5), (296_608, now)]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = reservations_path(&dir.path().join("cohort-lxd-start-x.lock"));
        assert_eq!(path.file_name().unwrap(), "cohort-lxd-start-x.idmaps");
        write_reservations(&path, &[(165_536, now)]).unwrap();
        let back = std::fs::read_to_string(&path).unwrap();
        assert_eq!(live_reservations(&back, now), vec![(165_536, now)]);
    }

    #[test]
    fn taken_ranges_come_from_isolated_containers_only() {
        let listing = vec![
            json!({"config": {"security.idmap.isolated": "true", "volatile.idmap.base": "165536"}}),
            json!({"config": {"security.idmap.isolated": "true", "security.idmap.base": "231072",
                              "security.idmap.size": "131072"}}),
            // Shares the host's first range with every unisolated container.
            json!({"config": {"volatile.idmap.base": "0"}}),
            // Being created by LXD right now: no range yet.
            json!({"config": {"security.idmap.isolated": "true"}}),
        ];
        assert_eq!(
            taken_ranges(&listing),
            vec![(165_536, RANGE_SIZE), (231_072, 131_072)]
        );
    }
}
