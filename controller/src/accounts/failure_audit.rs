//! Which failed authentications become `failed_sign_in` rows of the audit log. Every 401 used to
//! write one, so a flood of bad sign-ins or tokens grew the table without bound. Now, in each
//! one-minute window, the first failure of a key (a source and the account or path it tried)
//! writes its row at once; its repeats in that window, and every failure past the window's cap
//! of rows, are only counted; the counts are written as one summary row by the first failure
//! after the window ends. A window therefore writes at most `rows_per_minute + 1` rows, however
//! many failures it saw, and the log still says who failed, where from and how often.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one window of counting lasts.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Keys named in one summary row (the most repeated first); the rest only counted.
const SUMMARY_KEYS: usize = 50;

/// What to write for one failure.
#[derive(Debug, Default, PartialEq)]
pub struct Rows {
    /// Write this failure's own row.
    pub own: bool,
    /// The summary of the window that ended, to write first (`repeats` by key, `dropped`).
    pub summary: Option<Value>,
}

#[derive(Debug)]
struct Window {
    began: Instant,
    /// Rows written in this window.
    written: u32,
    /// Keys that wrote their row in this window, with their repeats since (bounded by the cap).
    repeats: HashMap<String, u64>,
    /// Failures past the cap, not written.
    dropped: u64,
}

impl Window {
    fn new(began: Instant) -> Self {
        Window {
            began,
            written: 0,
            repeats: HashMap::new(),
            dropped: 0,
        }
    }

    /// What the window counted and did not write, if anything.
    fn summary(&self) -> Option<Value> {
        let mut repeated: Vec<(&String, &u64)> =
            self.repeats.iter().filter(|(_, n)| **n > 0).collect();
        if repeated.is_empty() && self.dropped == 0 {
            return None;
        }
        repeated.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let total: u64 = repeated.iter().map(|(_, n)| **n).sum();
        let named: serde_json::Map<String, Value> = repeated
            .iter()
            .take(SUMMARY_KEYS)
            .map(|(k, n)| ((*k).clone(), json!(n)))
            .collect();
        Some(json!({
            "summary": true,
            "window_s": WINDOW.as_secs(),
            "repeats": named,
            "repeats_total": total,
            "dropped": self.dropped,
        }))
    }
}

/// The gate every failed authentication passes before it is audited.
#[derive(Debug)]
pub struct FailureAudit {
    rows_per_minute: u32,
    window: Mutex<Option<Window>>,
}

impl FailureAudit {
    /// At most `rows_per_minute` rows of failures a window, besides its summary (at least 1).
    pub fn new(rows_per_minute: u32) -> Self {
        FailureAudit {
            rows_per_minute: rows_per_minute.max(1),
            window: Mutex::new(None),
        }
    }

    /// Counts one failure of `key` at `now`; what to write for it.
    pub fn admit(&self, key: &str, now: Instant) -> Rows {
        let mut slot = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows = Rows::default();
        let window = match slot.take() {
            Some(w) if now < w.began + WINDOW => slot.insert(w),
            ended => {
                rows.summary = ended.and_then(|w| w.summary());
                slot.insert(Window::new(now))
            }
        };
        if let Some(n) = window.repeats.get_mut(key) {
            *n += 1;
        } else if window.written < self.rows_per_minute {
            window.written += 1;
            window.repeats.insert(key.to_string(), 0);
            rows.own = true;
        } else {
            window.dropped += 1;
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_writes_once_a_window_and_its_repeats_are_summed_after() {
        let t0 = Instant::now();
        let gate = FailureAudit::new(10);
        assert_eq!(
            gate.admit("10.0.0.1 alice", t0),
            Rows {
                own: true,
                summary: None
            }
        );
        for _ in 0..99 {
            assert_eq!(gate.admit("10.0.0.1 alice", t0), Rows::default());
        }
        assert!(gate.admit("10.0.0.1 bob", t0).own, "another key writes");
        let next = gate.admit("10.0.0.1 alice", t0 + WINDOW);
        assert!(next.own, "a new window writes again");
        let summary = next.summary.expect("the ended window's summary");
        assert_eq!(summary["repeats"]["10.0.0.1 alice"], 99);
        assert_eq!(summary["repeats_total"], 99);
        assert_eq!(summary["dropped"], 0);
    }

    #[test]
    fn a_flood_of_keys_writes_at_most_the_cap_and_one_summary_a_window() {
        let t0 = Instant::now();
        let gate = FailureAudit::new(5);
        let written = (0..1000)
            .filter(|i| gate.admit(&format!("key{i}"), t0).own)
            .count();
        assert_eq!(written, 5);
        let next = gate.admit("key0", t0 + WINDOW + Duration::from_secs(1));
        assert_eq!(next.summary.expect("summary")["dropped"], 995);
        assert_eq!(
            gate.admit("x", t0 + 3 * WINDOW),
            Rows {
                own: true,
                summary: None
            },
            "a quiet window has nothing to summarise"
        );
    }
}
