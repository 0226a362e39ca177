//! Creates that outlast the agent's wait. LXD keeps creating after the agent stops waiting
//! (`create_wait_s`, answered 503 `creating`), and the container it is making is visible all
//! the while: a retry that took it for made would write a host key into a half-made root
//! filesystem, shift a tree still being written and find the daemon "busy". So the agent
//! remembers the daemon's create operation per instance, and a retry waits on that operation
//! (found again in the daemon's list after an agent restart) before touching the container.
//! Work on one idempotency key is serialised: two calls with the same key never run at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::OwnedMutexGuard;

/// The agent's creates in flight and the turns of each idempotency key.
#[derive(Default)]
pub struct InFlight {
    /// One lock per key while someone holds or waits for it (dropped with its last user).
    turns: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
    /// The daemon's create operation (its URL) per instance name, until seen finished.
    creates: Mutex<HashMap<String, String>>,
}

impl InFlight {
    /// Waits for `key`'s turn; the work on it is this caller's until the guard drops.
    pub async fn turn(&self, key: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut turns = self.turns.lock().expect("turns lock");
            turns.retain(|_, weak| weak.strong_count() > 0);
            match turns.get(key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(tokio::sync::Mutex::new(()));
                    turns.insert(key.to_string(), Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }

    /// The daemon creates `name` in `operation`.
    pub fn started(&self, name: &str, operation: &str) {
        self.creates
            .lock()
            .expect("creates lock")
            .insert(name.to_string(), operation.to_string());
    }

    /// The create operation of `name` still remembered, if any.
    pub fn operation(&self, name: &str) -> Option<String> {
        self.creates
            .lock()
            .expect("creates lock")
            .get(name)
            .cloned()
    }

    /// `name`'s create operation has finished.
    pub fn finished(&self, name: &str) {
        self.creates.lock().expect("creates lock").remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn one_key_is_worked_on_by_one_caller_at_a_time() {
        let in_flight = Arc::new(InFlight::default());
        let first = in_flight.turn("k").await;
        let waiting = {
            let in_flight = in_flight.clone();
            tokio::spawn(async move {
                let _second = in_flight.turn("k").await;
            })
        };
        let other = tokio::time::timeout(Duration::from_secs(1), in_flight.turn("other")).await;
        assert!(other.is_ok(), "another key is not held up");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiting.is_finished(),
            "the second caller waits for the first"
        );
        drop(first);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("the second caller runs once the first is done")
            .unwrap();
    }

    #[test]
    fn a_create_is_remembered_until_it_finished() {
        let in_flight = InFlight::default();
        in_flight.started("a", "/1.0/operations/x");
        assert_eq!(
            in_flight.operation("a").as_deref(),
            Some("/1.0/operations/x")
        );
        in_flight.finished("a");
        assert_eq!(in_flight.operation("a"), None);
    }
}
