//! Failed authentication per key: a bounded in-memory table of one-minute windows. A key with
//! `limit` failures (401s) in its window is answered 429, with `Retry-After`, until the window
//! ends, whatever it presents, so a token or join secret cannot be guessed at speed. The API
//! keys on the source address; portal sign-in on the source and account together, with a much
//! larger budget for the source alone ([`crate::accounts::sign_in`]), so one student's typos
//! behind a campus NAT lock out only that student. The table holds at most `capacity` keys;
//! when full, finished windows go first, then the oldest, so a flood costs bounded memory.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a source's failures count.
pub const WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
struct Window {
    began: Instant,
    failures: u32,
}

#[derive(Debug)]
pub struct AuthFailures<K = IpAddr> {
    /// Failures allowed in a window; 0: no limit.
    limit: u32,
    capacity: usize,
    sources: Mutex<HashMap<K, Window>>,
}

impl<K: Hash + Eq + Clone> AuthFailures<K> {
    pub fn new(limit: u32, capacity: usize) -> Self {
        AuthFailures {
            limit,
            capacity: capacity.max(1),
            sources: Mutex::new(HashMap::new()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<K, Window>> {
        // A panic elsewhere while holding it leaves counts only; they are still good.
        self.sources.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How long `source` must wait before it is heard again, if it has used up its failures.
    pub fn blocked(&self, source: &K, now: Instant) -> Option<Duration> {
        if self.limit == 0 {
            return None;
        }
        let window = *self.table().get(source)?;
        let ends = window.began + WINDOW;
        (window.failures >= self.limit && now < ends).then(|| ends - now)
    }

    /// Counts one failed authentication of `source`.
    pub fn record(&self, source: K, now: Instant) {
        if self.limit == 0 {
            return;
        }
        self.count(&mut self.table(), source, now);
    }

    fn count(&self, table: &mut HashMap<K, Window>, source: K, now: Instant) {
        if !table.contains_key(&source) && table.len() >= self.capacity {
            table.retain(|_, w| now < w.began + WINDOW);
            if table.len() >= self.capacity {
                if let Some(oldest) = table
                    .iter()
                    .min_by_key(|(_, w)| w.began)
                    .map(|(key, _)| key.clone())
                {
                    table.remove(&oldest);
                }
            }
        }
        let window = table.entry(source).or_insert(Window {
            began: now,
            failures: 0,
        });
        if now >= window.began + WINDOW {
            *window = Window {
                began: now,
                failures: 0,
            };
        }
        window.failures = window.failures.saturating_add(1);
    }

    /// Counts an attempt of `source` as a failure before it is checked, so that attempts made at
    /// once are bounded by the limit as one after another are; `Err` with the wait when the
    /// source has used up its failures (nothing counted). A success is then [`forgive`]n.
    ///
    /// [`forgive`]: AuthFailures::forgive
    pub fn attempt(&self, source: K, now: Instant) -> Result<(), Duration> {
        if self.limit == 0 {
            return Ok(());
        }
        // Checked and counted under one lock: no two attempts both see the last free failure.
        let mut table = self.table();
        if let Some(window) = table.get(&source) {
            let ends = window.began + WINDOW;
            if window.failures >= self.limit && now < ends {
                return Err(ends - now);
            }
        }
        self.count(&mut table, source, now);
        Ok(())
    }

    /// Takes back one failure counted by [`AuthFailures::attempt`] for an attempt that succeeded.
    pub fn forgive(&self, source: &K) {
        if let Some(window) = self.table().get_mut(source) {
            window.failures = window.failures.saturating_sub(1);
        }
    }

    /// Sources remembered now (for tests and the bound).
    pub fn len(&self) -> usize {
        self.table().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn a_source_is_blocked_after_its_limit_until_its_window_ends() {
        let t0 = Instant::now();
        let failures = AuthFailures::new(3, 100);
        for _ in 0..3 {
            assert_eq!(failures.blocked(&ip(1), t0), None);
            failures.record(ip(1), t0);
        }
        let wait = failures.blocked(&ip(1), t0 + Duration::from_secs(10));
        assert_eq!(wait, Some(Duration::from_secs(50)));
        assert_eq!(failures.blocked(&ip(2), t0), None, "another source is not");
        assert_eq!(
            failures.blocked(&ip(1), t0 + WINDOW),
            None,
            "the window ended"
        );
        failures.record(ip(1), t0 + WINDOW);
        assert_eq!(
            failures.blocked(&ip(1), t0 + WINDOW),
            None,
            "a new window counts afresh"
        );
    }

    #[test]
    fn the_table_never_holds_more_than_its_capacity() {
        let t0 = Instant::now();
        let failures = AuthFailures::new(2, 3);
        failures.record(ip(1), t0);
        failures.record(ip(1), t0);
        for last in 2..=50 {
            failures.record(ip(last), t0 + Duration::from_secs(1));
            assert!(failures.len() <= 3);
        }
        // The oldest went first: source 1's failures are forgotten.
        assert_eq!(failures.blocked(&ip(1), t0 + Duration::from_secs(2)), None);
        // Finished windows go before live ones.
        let later = t0 + WINDOW + Duration::from_secs(5);
        failures.record(ip(60), later);
        failures.record(ip(60), later);
        failures.record(ip(61), later);
        failures.record(ip(62), later);
        assert!(
            failures.blocked(&ip(60), later).is_some(),
            "a live window stays"
        );
    }

    #[test]
    fn a_limit_of_zero_turns_it_off() {
        let failures = AuthFailures::new(0, 10);
        let now = Instant::now();
        for _ in 0..100 {
            failures.record(ip(1), now);
        }
        assert_eq!(failures.blocked(&ip(1), now), None);
        assert!(failures.is_empty());
    }
}
