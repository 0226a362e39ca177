//! Which failed authentications become `failed_sign_in` rows of the audit log. Every 401 used to
//! write one, so a flood of bad sign-ins or tokens grew the table without bound. Now each
//! one-minute window writes at most `rows_per_minute` rows of their own (an ordinary minute's
//! typos are all there, one row each, as before); the failures past that cap are only counted,
//! by key (the source and the account or path it tried), and written as one summary row once the
//! window ends: by the next failure, or by the controller's beat ([`FailureAudit::ended`]),
//! whichever comes first, so a flood that stops is still summed up within seconds of its minute.
//! A window therefore writes at most `rows_per_minute + 1` rows, however many failures it saw,
//! and the log still says who failed, where from and how often.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// How long one window of counting lasts.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Keys named in one summary row (the most frequent first); the rest are only in the totals.
const SUMMARY_KEYS: usize = 50;

/// Keys counted one by one in a window; a flood from more keys than this is counted in `others`.
const COUNTED_KEYS: usize = 10_000;

/// What to write for one failure.
#[derive(Debug, Default, PartialEq)]
pub struct Rows {
    /// Write this failure's own row.
    pub own: bool,
    /// The summary of the window that ended, to write first.
    pub summary: Option<Value>,
}

#[derive(Debug)]
struct Window {
    began: Instant,
    /// `began` on the wall clock, named in the summary (written after the window).
    began_at: DateTime<Utc>,
    /// Rows written in this window.
    written: u32,
    /// Failures past the cap, by key.
    unwritten: HashMap<String, u64>,
    /// Failures past the cap of keys beyond [`COUNTED_KEYS`].
    others: u64,
}

impl Window {
    fn new(began: Instant) -> Self {
        Window {
            began,
            began_at: Utc::now(),
            written: 0,
            unwritten: HashMap::new(),
            others: 0,
        }
    }

    /// What the window counted and did not write, if anything.
    fn summary(&self) -> Option<Value> {
        if self.unwritten.is_empty() && self.others == 0 {
            return None;
        }
        let mut keys: Vec<(&String, &u64)> = self.unwritten.iter().collect();
        keys.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let total = keys.iter().map(|(_, n)| **n).sum::<u64>() + self.others;
        let named: serde_json::Map<String, Value> = keys
            .iter()
            .take(SUMMARY_KEYS)
            .map(|(k, n)| ((*k).clone(), json!(n)))
            .collect();
        Some(json!({
            "summary": true,
            "window_began": self.began_at.to_rfc3339(),
            "window_s": WINDOW.as_secs(),
            "written": self.written,
            "unwritten_total": total,
            "unwritten": named,
            "keys": keys.len() as u64 + u64::from(self.others > 0),
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
        if window.written < self.rows_per_minute {
            window.written += 1;
            rows.own = true;
        } else if let Some(n) = window.unwritten.get_mut(key) {
            *n += 1;
        } else if window.unwritten.len() < COUNTED_KEYS {
            window.unwritten.insert(key.to_string(), 1);
        } else {
            window.others += 1;
        }
        rows
    }

    /// The summary of the window if it has ended by `now`; the window is closed, so its counts
    /// are handed out once, here or to the next failure.
    pub fn ended(&self, now: Instant) -> Option<Value> {
        let mut slot = self.window.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some(w) if now >= w.began + WINDOW => slot.take().and_then(|w| w.summary()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_of_typos_writes_each_and_a_flood_past_the_cap_is_summed_after() {
        let t0 = Instant::now();
        let gate = FailureAudit::new(10);
        let own = (0..10)
            .filter(|_| gate.admit("10.0.0.1 alice", t0).own)
            .count();
        assert_eq!(own, 10, "under the cap every failure has its row");
        for _ in 0..90 {
            assert_eq!(gate.admit("10.0.0.1 alice", t0), Rows::default());
        }
        assert_eq!(gate.admit("10.0.0.2 bob", t0), Rows::default());
        let next = gate.admit("10.0.0.1 alice", t0 + WINDOW);
        assert!(next.own, "a new window writes again");
        let summary = next.summary.expect("the ended window's summary");
        assert_eq!(summary["unwritten"]["10.0.0.1 alice"], 90);
        assert_eq!(summary["unwritten"]["10.0.0.2 bob"], 1);
        assert_eq!(summary["unwritten_total"], 91);
        assert_eq!(summary["written"], 10);
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
        assert_eq!(next.summary.expect("summary")["unwritten_total"], 995);
        assert_eq!(
            gate.admit("x", t0 + 3 * WINDOW),
            Rows {
                own: true,
                summary: None
            },
            "a quiet window has nothing to summarise"
        );
    }

    #[test]
    fn an_ended_window_is_summed_up_once_without_a_later_failure() {
        let t0 = Instant::now();
        let gate = FailureAudit::new(1);
        for _ in 0..30 {
            gate.admit("10.0.0.1 /api/v1/me", t0);
        }
        assert_eq!(gate.ended(t0 + WINDOW / 2), None, "the window still counts");
        let summary = gate.ended(t0 + WINDOW).expect("the ended window's summary");
        assert_eq!(summary["unwritten"]["10.0.0.1 /api/v1/me"], 29);
        assert!(summary["window_began"].is_string(), "{summary}");
        assert_eq!(gate.ended(t0 + 2 * WINDOW), None, "handed out once");
        assert!(
            gate.admit("10.0.0.1 /api/v1/me", t0 + 2 * WINDOW)
                .summary
                .is_none(),
            "nor again by the next failure"
        );
    }
}
