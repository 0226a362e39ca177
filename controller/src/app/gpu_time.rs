//! GPU time (issue 43): what each poll of a node adds to its instances' hourly GPU-seconds, and
//! whether a container's GPU counts as busy for the reclaimer.
//!
//! A running container *holds* a GPU when one is attached to it (its `cohort-gpu*` devices, from
//! the node's listing) or when its processes run on one (the agent's per-container use). Each
//! poll accounts the time since the node's previous poll (its last heartbeat, capped at three
//! poll intervals so a node that was unreachable adds no guessed time): that time once per GPU
//! held is *allocated*, and weighted by the container's utilisation of each GPU is *busy*. A
//! GPU whose utilisation NVML does not give adds allocated time only.
//!
//! Busy for the reclaimer is a busy share (utilisation over the GPUs held) at or above
//! `COHORT_GPU_IDLE_BELOW_PERCENT`: a process holding a CUDA context at 0 % is idle, as is a
//! container without any. Where NVML gives no utilisation at all, a compute process still counts
//! as use (what Cohort did before it measured).

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};
use cohort_proto::agent::{Instance as AgentInstance, InstanceGpuUse, Inventory};
use diesel::prelude::*;

use crate::db::models::node::Node;
use crate::db::queries::gpu_usage;

/// One container's GPUs at one poll: per GPU held, its utilisation when known.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    pub gpus: BTreeMap<String, Option<u32>>,
    /// Compute processes (CUDA contexts) on them.
    pub processes: u32,
}

impl Held {
    /// What `listed` holds by attachment and `inv` says its processes use.
    pub fn of(inv: &Inventory, listed: Option<&AgentInstance>, name: &str) -> Held {
        let mut held = Held::default();
        // A MIG slice's processes are reported on its parent GPU: they count as the slice's.
        let mut slice_of: BTreeMap<&str, &str> = BTreeMap::new();
        for a in listed.map_or(&[][..], |l| &l.gpus[..]) {
            let key = a.mig_uuid.as_deref().unwrap_or(&a.uuid);
            slice_of.insert(&a.uuid, key);
            held.gpus.insert(key.to_string(), None);
        }
        if let Some(using) = inv.gpus.instances.iter().find(|u| u.instance == name) {
            held.add_use(using, &slice_of);
        }
        // An attached GPU without any of its processes does nothing.
        for util in held.gpus.values_mut() {
            if util.is_none() && held.processes == 0 {
                *util = Some(0);
            }
        }
        held
    }

    fn add_use(&mut self, using: &InstanceGpuUse, slice_of: &BTreeMap<&str, &str>) {
        for g in &using.gpus {
            let key = slice_of.get(g.uuid.as_str()).copied().unwrap_or(&g.uuid);
            self.gpus.insert(key.to_string(), g.utilization_percent);
            self.processes += g.processes;
        }
    }

    /// (allocated, busy) GPU-seconds over `seconds`.
    pub fn seconds(&self, seconds: f64) -> (f64, f64) {
        let allocated = seconds * self.gpus.len() as f64;
        let busy: f64 = self
            .gpus
            .values()
            .map(|u| seconds * f64::from(u.unwrap_or(0).min(100)) / 100.0)
            .sum();
        (allocated, busy)
    }

    /// Whether its GPU counts as in use: its busy share at or above `idle_below_percent`, or,
    /// where no utilisation is known, any compute process.
    pub fn busy(&self, idle_below_percent: u32) -> bool {
        let known: Vec<u32> = self.gpus.values().filter_map(|u| *u).collect();
        if known.is_empty() {
            return self.processes > 0;
        }
        let share =
            known.iter().map(|u| f64::from(*u.min(&100))).sum::<f64>() / self.gpus.len() as f64;
        share >= f64::from(idle_below_percent)
    }
}

/// `seconds` ending at `end`, split at the hour boundaries: (hour, seconds in it), oldest first.
pub fn split_by_hour(end: DateTime<Utc>, seconds: f64) -> Vec<(DateTime<Utc>, f64)> {
    let mut out = Vec::new();
    let mut left = seconds.max(0.0);
    let mut until = end;
    while left > 1e-9 {
        let mut hour = until.duration_trunc(Duration::hours(1)).unwrap_or(until);
        if hour == until {
            // Exactly on the hour: the time before it is the previous hour's.
            hour -= Duration::hours(1);
        }
        let room = (until - hour).num_milliseconds() as f64 / 1000.0;
        let take = left.min(room);
        out.push((hour, take));
        left -= take;
        until = hour;
    }
    out.reverse();
    out
}

/// What one poll added for one course (the metrics' counters).
#[derive(Debug, Clone, PartialEq)]
pub struct Added {
    pub course: String,
    pub allocated_s: f64,
    pub busy_s: f64,
}

/// Accounts the time since `previous` (the node's last heartbeat) to the GPUs its running
/// containers hold now; at most `cap_s` seconds. Returns what it added per course.
pub fn account(
    conn: &mut PgConnection,
    node: &Node,
    previous: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    cap_s: f64,
    inv: &Inventory,
    listing: &[AgentInstance],
) -> QueryResult<Vec<Added>> {
    let Some(previous) = previous else {
        return Ok(Vec::new());
    };
    let seconds = ((now - previous).num_milliseconds() as f64 / 1000.0).clamp(0.0, cap_s);
    if seconds <= 0.0 {
        return Ok(Vec::new());
    }
    let mut by_course: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for who in gpu_usage::accountable_on(conn, node.id)? {
        let listed = listing.iter().find(|i| i.name == who.name);
        if listed.map(|i| i.status.as_str()) != Some("Running") {
            continue;
        }
        let held = Held::of(inv, listed, &who.name);
        if held.gpus.is_empty() {
            continue;
        }
        let (allocated, busy) = held.seconds(seconds);
        for (hour, part) in split_by_hour(now, seconds) {
            let share = part / seconds;
            gpu_usage::add(
                conn,
                &who,
                &node.name,
                hour,
                allocated * share,
                busy * share,
            )?;
        }
        let sums = by_course
            .entry(who.course_code.clone().unwrap_or_else(|| "none".into()))
            .or_default();
        sums.0 += allocated;
        sums.1 += busy;
    }
    Ok(by_course
        .into_iter()
        .map(|(course, (allocated_s, busy_s))| Added {
            course,
            allocated_s,
            busy_s,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn time_across_an_hour_is_split_between_both() {
        let end = Utc.with_ymd_and_hms(2026, 11, 27, 10, 0, 20).unwrap();
        let parts = split_by_hour(end, 30.0);
        assert_eq!(
            parts,
            vec![
                (Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap(), 10.0),
                (Utc.with_ymd_and_hms(2026, 11, 27, 10, 0, 0).unwrap(), 20.0),
            ]
        );
        let on_the_hour = Utc.with_ymd_and_hms(2026, 11, 27, 10, 0, 0).unwrap();
        assert_eq!(
            split_by_hour(on_the_hour, 5.0),
            vec![(Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap(), 5.0)]
        );
    }

    #[test]
    fn a_context_at_zero_percent_is_idle_and_unknown_use_counts_processes() {
        let mut held = Held::default();
        held.gpus.insert("g".into(), Some(0));
        held.processes = 1;
        assert!(!held.busy(5), "a held context at 0 % is idle");
        assert_eq!(held.seconds(10.0), (10.0, 0.0));
        held.gpus.insert("g".into(), Some(40));
        assert!(held.busy(5));
        assert_eq!(held.seconds(10.0), (10.0, 4.0));
        held.gpus.insert("h".into(), Some(0));
        assert!(held.busy(5), "a 20 % share of two GPUs");
        assert!(!held.busy(25));
        let unknown = Held {
            gpus: [("g".to_string(), None)].into(),
            processes: 1,
        };
        assert!(unknown.busy(5), "no utilisation known: a process is use");
        assert_eq!(unknown.seconds(10.0), (10.0, 0.0));
    }
}
