//! NVML on one thread of its own, asked with a deadline. NVML calls block in the driver, and a
//! wedged driver blocks them for good: read on a fresh blocking thread every poll, each poll
//! leaked one more thread until the runtime's blocking pool was full and the node could create
//! nothing. Here a single thread does every read; a caller waits at most [`DEADLINE`] for it and
//! otherwise gets the last good reading, marked `unavailable` with its age (so the node's
//! placements keep their GPUs, and the metrics and doctor show the wedge). While the thread is
//! stuck no new read is started: one thread is stuck, never one a poll.

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cohort_proto::agent::GpuInventory;
use tokio::sync::oneshot;

/// Longest a caller waits for NVML before it is answered from the cache.
pub const DEADLINE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    /// When the read in progress began (`None`: the thread is idle).
    busy_since: Option<Instant>,
    /// The last reading that came back, and when.
    last: Option<(Instant, GpuInventory)>,
    /// Callers waiting for the read in progress.
    waiters: Vec<oneshot::Sender<GpuInventory>>,
}

/// The NVML thread and what it last read.
pub struct NvmlReader {
    state: Arc<Mutex<State>>,
    wake: SyncSender<()>,
    deadline: Duration,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl NvmlReader {
    /// Starts the thread reading the NVML library at `library` (`None`: the system's).
    pub fn start(library: Option<PathBuf>, deadline: Duration) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        // One pending wake at most: asks made while a read runs are served by the next one.
        let (wake, woken) = sync_channel::<()>(1);
        let shared = state.clone();
        std::thread::Builder::new()
            .name("nvml".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    let read = super::inventory(library.as_deref());
                    let mut st = lock(&shared);
                    st.busy_since = None;
                    st.last = Some((Instant::now(), read.clone()));
                    for waiter in st.waiters.drain(..) {
                        let _ = waiter.send(read.clone());
                    }
                }
            })
            .expect("spawn the NVML thread");
        NvmlReader {
            state,
            wake,
            deadline,
        }
    }

    /// A fresh reading when NVML answers within the deadline, else the last one with its age.
    pub async fn read(&self) -> GpuInventory {
        let (tx, rx) = oneshot::channel();
        {
            let mut st = lock(&self.state);
            st.waiters.retain(|w| !w.is_closed());
            st.waiters.push(tx);
            if st.busy_since.is_none() {
                st.busy_since = Some(Instant::now());
                match self.wake.try_send(()) {
                    Ok(()) | Err(TrySendError::Full(())) => {}
                    Err(TrySendError::Disconnected(())) => st.busy_since = None,
                }
            }
        }
        match tokio::time::timeout(self.deadline, rx).await {
            Ok(Ok(read)) => read,
            _ => self.cached(),
        }
    }

    /// The last reading marked with how long NVML has not answered, or none with the reason.
    fn cached(&self) -> GpuInventory {
        let st = lock(&self.state);
        let stuck = st
            .busy_since
            .map_or(self.deadline, |since| since.elapsed())
            .as_secs();
        let why = format!("NVML has not answered for {stuck} s (a wedged driver?)");
        match &st.last {
            Some((at, read)) => GpuInventory {
                unavailable: Some(format!(
                    "{why}; the GPUs as read {} s ago",
                    at.elapsed().as_secs()
                )),
                ..read.clone()
            },
            None => GpuInventory {
                unavailable: Some(format!("{why}; no reading yet")),
                driver_version: None,
                gpus: Vec::new(),
                instances: Vec::new(),
            },
        }
    }
}
