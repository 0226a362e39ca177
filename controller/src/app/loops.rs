//! The background loops under watch. Each loop (the job worker, the placement queue, the node
//! poller, the reclaimer, the page-cache pruner) runs as a task of its own under
//! [`supervise`]: a loop that panics or returns is recorded as dead with its reason, logged, and
//! started again after a pause; a loop that ticks ([`Loops::tick`]) and has not for longer than
//! its allowance is stale. `/healthz` reports every loop's last tick and answers 503 while one is
//! dead or stale, so a controller that quietly stopped working is not called healthy.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::app::state::Controller;

/// How long a dead loop waits before it is started again (a loop that dies at once does not spin).
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// How long after its start a loop named by `COHORT_TEST_KILL_LOOP` panics.
const TEST_KILL_AFTER: Duration = Duration::from_secs(5);

#[derive(Debug)]
struct Watched {
    /// Longest silence allowed between ticks; `None` for a loop that does not tick (only its
    /// death is seen).
    stale_after: Option<Duration>,
    /// When it was last started, or last ticked.
    last_tick: Instant,
    last_tick_at: Option<DateTime<Utc>>,
    /// Why its last run ended, until it runs and ticks again.
    dead: Option<String>,
    restarts: u32,
}

/// Every supervised loop of this process.
#[derive(Debug, Default)]
pub struct Loops(Mutex<BTreeMap<&'static str, Watched>>);

/// One loop's health as `/healthz` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LoopHealth {
    pub name: &'static str,
    /// `running`, `stale` or `dead`.
    pub state: &'static str,
    /// When it last ticked (RFC 3339); absent for a loop that does not tick or has not yet.
    pub last_tick: Option<DateTime<Utc>>,
    /// Seconds since it last ticked or was started.
    pub seconds_since_tick: u64,
    pub restarts: u32,
    /// Why it is dead or stale.
    pub problem: Option<String>,
}

impl Loops {
    fn watch(&self, name: &'static str, stale_after: Option<Duration>) {
        self.0.lock().expect("loops").insert(
            name,
            Watched {
                stale_after,
                last_tick: Instant::now(),
                last_tick_at: None,
                dead: None,
                restarts: 0,
            },
        );
    }

    /// Records that `name` is alive and making progress; a loop that was dead and ticks again
    /// (restarted) is running again.
    pub fn tick(&self, name: &'static str) {
        if let Some(w) = self.0.lock().expect("loops").get_mut(name) {
            w.last_tick = Instant::now();
            w.last_tick_at = Some(Utc::now());
            w.dead = None;
        }
    }

    fn died(&self, name: &'static str, why: String) {
        if let Some(w) = self.0.lock().expect("loops").get_mut(name) {
            w.dead = Some(why);
        }
    }

    /// A loop that does not tick has run a while since its (re)start: it counts as running.
    fn survived(&self, name: &'static str) {
        if let Some(w) = self.0.lock().expect("loops").get_mut(name) {
            if w.stale_after.is_none() {
                w.dead = None;
            }
        }
    }

    fn restarted(&self, name: &'static str) {
        if let Some(w) = self.0.lock().expect("loops").get_mut(name) {
            w.restarts += 1;
            w.last_tick = Instant::now();
        }
    }

    /// Every loop's health, by name.
    pub fn report(&self) -> Vec<LoopHealth> {
        let now = Instant::now();
        self.0
            .lock()
            .expect("loops")
            .iter()
            .map(|(name, w)| {
                let silent = now.saturating_duration_since(w.last_tick);
                let stale = w.stale_after.filter(|limit| silent > *limit);
                let (state, problem) = match (&w.dead, stale) {
                    (Some(why), _) => ("dead", Some(why.clone())),
                    (None, Some(limit)) => (
                        "stale",
                        Some(format!(
                            "no tick for {} s (allowed {} s)",
                            silent.as_secs(),
                            limit.as_secs()
                        )),
                    ),
                    (None, None) => ("running", None),
                };
                LoopHealth {
                    name,
                    state,
                    last_tick: w.last_tick_at,
                    seconds_since_tick: silent.as_secs(),
                    restarts: w.restarts,
                    problem,
                }
            })
            .collect()
    }
}

/// Runs the loop `make` builds as `name`, watched: its death (panic or return) is recorded and
/// logged, and it is started again after [`RESTART_AFTER`]. `stale_after` is how long it may go
/// without a [`Loops::tick`] (`None`: it does not tick).
pub fn supervise<F, Fut>(
    ctl: Arc<Controller>,
    name: &'static str,
    stale_after: Option<Duration>,
    make: F,
) where
    F: Fn(Arc<Controller>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    ctl.loops.watch(name, stale_after);
    tokio::spawn(async move {
        loop {
            let run = make(ctl.clone());
            let killed = ctl.config.server.test_kill_loop.as_deref() == Some(name);
            let mut handle = tokio::spawn(async move {
                if killed {
                    let _ = tokio::time::timeout(TEST_KILL_AFTER, run).await;
                    panic!("COHORT_TEST_KILL_LOOP killed this loop");
                }
                run.await
            });
            let ended = tokio::select! {
                ended = &mut handle => ended,
                _ = tokio::time::sleep(RESTART_AFTER) => {
                    ctl.loops.survived(name);
                    handle.await
                }
            };
            let why = match ended {
                Ok(()) => "the loop returned".to_string(),
                Err(e) if e.is_panic() => {
                    let payload = e.into_panic();
                    let text = payload
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    format!("panicked: {text}")
                }
                Err(e) => format!("cancelled: {e}"),
            };
            tracing::error!(r#loop = name, why = %why, "a background loop died; starting it again in {} s", RESTART_AFTER.as_secs());
            ctl.loops.died(name, why);
            tokio::time::sleep(RESTART_AFTER).await;
            ctl.loops.restarted(name);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_or_silent_loop_is_reported() {
        let loops = Loops::default();
        loops.watch("ticking", Some(Duration::from_millis(10)));
        loops.watch("quiet", None);
        loops.tick("ticking");
        assert!(loops.report().iter().all(|l| l.state == "running"));
        std::thread::sleep(Duration::from_millis(30));
        let report = loops.report();
        assert_eq!(report[1].name, "ticking");
        assert_eq!(report[1].state, "stale");
        assert_eq!(
            report[0].state, "running",
            "a loop that does not tick is never stale"
        );
        loops.died("quiet", "panicked: boom".into());
        assert_eq!(loops.report()[0].state, "dead");
        loops.tick("ticking");
        assert_eq!(loops.report()[1].state, "running");
    }
}
