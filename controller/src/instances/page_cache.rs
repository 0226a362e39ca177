//! Pages of `GET /instances` kept in memory, each served again only while the database holds
//! exactly what it showed.
//!
//! A page is read inside a read-only `REPEATABLE READ` transaction, so it is what one snapshot
//! of the database holds, and is kept with that snapshot (`pg_current_snapshot()`). Every
//! transaction that changes a table a page shows leaves its id in `inventory_writes` (a statement
//! trigger on each of them, so no write path can forget, whichever controller process or tool
//! makes it). A kept page is served again only after one statement on the request's own
//! connection finds no committed transaction in `inventory_writes` that its snapshot did not see.
//! The check asks the database what it has committed, not this process what it has written, so
//! it holds with several controllers on one database: a write acknowledged to anyone before the
//! request began is seen, exactly as by a fresh read.
//!
//! `inventory_writes` only grows with writes; [`run`] prunes ids every kept page has already
//! seen. A page is served for at most [`MAX_AGE`]; an id is pruned only once it is older than
//! the oldest snapshot of [`PRUNE_AFTER`] ago, which no kept page can be older than.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use actix_web::web::Bytes;
use diesel::prelude::*;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use cohort_proto::api::users::Role;

use crate::accounts::auth::Caller;
use crate::app::metrics::{Metrics, OutcomeLabels};
use crate::app::state::Controller;
pub use crate::db::queries::page::{
    current_snapshot, oldest_running, prune_below, unchanged_since,
};

/// The longest a page is served from memory, however often it is found unchanged.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// Ids in `inventory_writes` older than the oldest snapshot of this long ago are pruned.
pub const PRUNE_AFTER: Duration = Duration::from_secs(2 * 60);

/// Which instances a caller's pages list: everything for an admin, a student's own, an
/// instructor's own and their courses'.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Scope {
    All,
    Owner(i64),
    Instructor(i64),
}

/// One page as asked for: whose, after which name, how many.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PageKey {
    scope: Scope,
    after: Option<String>,
    limit: u32,
}

impl PageKey {
    pub fn new(caller: &Caller, after: Option<&str>, limit: u32) -> Self {
        let scope = match caller.role {
            Role::Admin => Scope::All,
            Role::Student => Scope::Owner(caller.user.id),
            Role::Instructor => Scope::Instructor(caller.user.id),
        };
        PageKey {
            scope,
            after: after.map(str::to_string),
            limit,
        }
    }
}

/// A page as sent: its JSON and the name the next page starts after.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub json: Bytes,
    pub next: Option<String>,
}

struct Kept {
    /// `pg_current_snapshot()` of the transaction that read the page, as text.
    snapshot: String,
    page: Page,
    at: Instant,
}

/// The pages kept by this process; at most `capacity`, none when it is 0.
pub struct PageCache {
    capacity: usize,
    state: Mutex<State>,
    /// Signalled when a read of a page ends.
    read_done: Condvar,
    /// Pages served again (`hit`) and read (`miss`).
    counts: Family<OutcomeLabels, Counter>,
}

#[derive(Default)]
struct State {
    kept: HashMap<PageKey, Kept>,
    /// Pages being read now: a request that finds its page stale while another reads it waits
    /// for that read instead of making the same one (after a write, every client asking for the
    /// page at that moment would read it: five reads a write under 64 clients).
    reading: HashSet<PageKey>,
}

/// The longest a request waits for another's read of its page before reading it itself.
const READ_WAIT: Duration = Duration::from_secs(1);

/// Marks a page as being read while alive; unmarks it, and wakes who waits, when dropped.
struct Reading<'a> {
    cache: &'a PageCache,
    key: PageKey,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.cache.lock().reading.remove(&self.key);
        self.cache.read_done.notify_all();
    }
}

impl PageCache {
    pub fn new(capacity: usize, counts: Family<OutcomeLabels, Counter>) -> Self {
        PageCache {
            capacity,
            state: Mutex::new(State::default()),
            read_done: Condvar::new(),
            counts,
        }
    }

    pub fn enabled(&self) -> bool {
        self.capacity > 0
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the map whole (every change is one call).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The page kept for `key` and the snapshot it was read under, unless older than
    /// [`MAX_AGE`].
    fn kept(&self, key: &PageKey) -> Option<(String, Page)> {
        self.lock()
            .kept
            .get(key)
            .filter(|k| k.at.elapsed() < MAX_AGE)
            .map(|k| (k.snapshot.clone(), k.page.clone()))
    }

    fn keep(&self, key: PageKey, snapshot: String, page: Page) {
        let mut state = self.lock();
        let kept = &mut state.kept;
        if kept.len() >= self.capacity && !kept.contains_key(&key) {
            kept.retain(|_, k| k.at.elapsed() < MAX_AGE);
            if kept.len() >= self.capacity {
                // Full of live pages: start again rather than track which is least used.
                kept.clear();
            }
        }
        kept.insert(
            key,
            Kept {
                snapshot,
                page,
                at: Instant::now(),
            },
        );
    }

    /// Marks `key` as being read by the caller, unless another request is reading it: then
    /// waits (once, at most [`READ_WAIT`]) for that read to end and returns `None`.
    fn read_or_wait(&self, key: &PageKey, waited: &mut bool) -> Option<Reading<'_>> {
        let mut state = self.lock();
        if state.reading.contains(key) && !*waited {
            *waited = true;
            let _ = self
                .read_done
                .wait_timeout_while(state, READ_WAIT, |s| s.reading.contains(key));
            return None;
        }
        state.reading.insert(key.clone());
        Some(Reading {
            cache: self,
            key: key.clone(),
        })
    }

    /// The page for `key`: the kept one when the database has committed no change to what
    /// pages show since it was read, else `read` inside a `REPEATABLE READ` read-only
    /// transaction, kept for the next request. While another request reads the same page, waits
    /// for it and checks what it kept the same way.
    pub fn page(
        &self,
        conn: &mut PgConnection,
        key: PageKey,
        read: impl FnOnce(&mut PgConnection) -> crate::error::ActionResult<Page>,
    ) -> crate::error::ActionResult<Page> {
        if !self.enabled() {
            Metrics::count(&self.counts, "miss");
            return read(conn);
        }
        let mut waited = false;
        let reading = loop {
            if let Some((snapshot, page)) = self.kept(&key) {
                if unchanged_since(conn, &snapshot)? {
                    Metrics::count(&self.counts, "hit");
                    return Ok(page);
                }
            }
            if let Some(reading) = self.read_or_wait(&key, &mut waited) {
                break reading;
            }
        };
        Metrics::count(&self.counts, "miss");
        let (snapshot, page) =
            conn.build_transaction()
                .repeatable_read()
                .read_only()
                .run(|conn| {
                    let snapshot = current_snapshot(conn)?;
                    Ok::<_, crate::error::ActionError>((snapshot, read(conn)?))
                })?;
        self.keep(key, snapshot, page.clone());
        drop(reading);
        Ok(page)
    }
}

/// The oldest-running ids read over time, and which of them is old enough to prune below.
#[derive(Default)]
pub struct PruneMarks {
    marks: VecDeque<(Instant, String)>,
}

impl PruneMarks {
    /// Records `xmin` read at `at`; returns the newest mark at least [`PRUNE_AFTER`] old, if
    /// any, dropping the older ones.
    pub fn record(&mut self, at: Instant, xmin: String) -> Option<String> {
        self.marks.push_back((at, xmin));
        let mut due = None;
        while let Some((t, _)) = self.marks.front() {
            if at.duration_since(*t) < PRUNE_AFTER {
                break;
            }
            due = self.marks.pop_front().map(|(_, x)| x);
        }
        due
    }
}

/// Prunes `inventory_writes` every `every` (and with two controllers each prunes; deleting
/// what the other deleted is harmless).
/// The pruner's name among the supervised loops (`/healthz`).
pub const LOOP: &str = "page_cache";

pub async fn run(ctl: Arc<Controller>, every: Duration) {
    let mut marks = PruneMarks::default();
    loop {
        ctl.loops.tick(LOOP);
        let pruned = ctl
            .db(move |conn| Ok(oldest_running(conn)?))
            .await
            .map(|xmin| marks.record(Instant::now(), xmin));
        match pruned {
            Ok(Some(xmin)) => match ctl.db(move |conn| Ok(prune_below(conn, &xmin)?)).await {
                Ok(n) if n > 0 => tracing::debug!(pruned = n, "inventory_writes pruned"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "pruning inventory_writes failed"),
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "reading the oldest running transaction failed"),
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(s: &str) -> Page {
        Page {
            json: Bytes::from(s.to_string()),
            next: None,
        }
    }

    fn key(scope: Scope) -> PageKey {
        PageKey {
            scope,
            after: None,
            limit: 100,
        }
    }

    #[test]
    fn a_page_is_kept_per_scope_and_at_most_capacity() {
        let cache = PageCache::new(2, Family::default());
        cache.keep(key(Scope::All), "1:1:".into(), page("all"));
        cache.keep(key(Scope::Owner(7)), "1:1:".into(), page("seven"));
        assert_eq!(cache.kept(&key(Scope::All)).unwrap().1, page("all"));
        assert_eq!(cache.kept(&key(Scope::Owner(7))).unwrap().1, page("seven"));
        assert!(cache.kept(&key(Scope::Instructor(7))).is_none());
        // Replacing a kept page keeps the others.
        cache.keep(key(Scope::All), "2:2:".into(), page("all again"));
        assert_eq!(cache.kept(&key(Scope::Owner(7))).unwrap().1, page("seven"));
        assert_eq!(cache.kept(&key(Scope::All)).unwrap().0, "2:2:");
        // A third page past capacity starts again.
        cache.keep(key(Scope::Instructor(7)), "3:3:".into(), page("course"));
        assert!(cache.kept(&key(Scope::All)).is_none());
        assert_eq!(
            cache.kept(&key(Scope::Instructor(7))).unwrap().1,
            page("course")
        );
    }

    #[test]
    fn a_request_waits_for_anothers_read_of_its_page_once() {
        let cache = Arc::new(PageCache::new(4, Family::default()));
        let mut waited = false;
        let reading = cache.read_or_wait(&key(Scope::All), &mut waited).unwrap();
        assert!(!waited);
        // Another page is not held up.
        let mut other = false;
        assert!(cache
            .read_or_wait(&key(Scope::Owner(1)), &mut other)
            .is_some());
        let (tx, rx) = std::sync::mpsc::channel();
        // Timed from before the spawn: a thread that starts late on a busy machine still
        // cannot see the page before the read ends.
        let started = Instant::now();
        let waiter = {
            let cache = cache.clone();
            std::thread::spawn(move || {
                let mut waited = false;
                let first = cache.read_or_wait(&key(Scope::All), &mut waited).is_none();
                tx.send(started.elapsed()).unwrap();
                // Having waited once, it reads itself.
                let second = cache.read_or_wait(&key(Scope::All), &mut waited).is_some();
                (first, waited, second)
            })
        };
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "the waiter must wait while the page is read"
        );
        drop(reading);
        let waited_for = rx
            .recv_timeout(READ_WAIT)
            .expect("woken when the read ended");
        assert!(waited_for >= Duration::from_millis(200), "{waited_for:?}");
        assert_eq!(waiter.join().unwrap(), (true, true, true));
    }

    #[test]
    fn marks_come_due_after_prune_after() {
        let mut marks = PruneMarks::default();
        let t0 = Instant::now();
        assert_eq!(marks.record(t0, "10".into()), None);
        assert_eq!(
            marks.record(t0 + Duration::from_secs(60), "20".into()),
            None
        );
        assert_eq!(
            marks.record(t0 + PRUNE_AFTER, "30".into()),
            Some("10".into())
        );
        // Both earlier marks are old enough now; the newer one is the bound.
        assert_eq!(
            marks.record(t0 + PRUNE_AFTER + Duration::from_secs(61), "40".into()),
            Some("20".into())
        );
        assert_eq!(
            marks.record(t0 + PRUNE_AFTER + Duration::from_secs(62), "41".into()),
            None
        );
    }
}
