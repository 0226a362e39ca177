//! Work done in rounds that start on a fixed beat: a round starts `every` after the previous one
//! started, or at once when that one took longer, so the time a round takes does not add to the
//! interval (the poller's round over a thousand nodes took 15 s, and with a sleep of the interval
//! after it each node was asked every 25 s instead of every 10).

use std::future::Future;
use std::time::Duration;

use tokio::time::{interval, MissedTickBehavior};

/// Runs `round` forever, each start `every` after the previous start (or right after the previous
/// round ends, when it ran longer than `every`; rounds never overlap).
pub async fn on_beat<F, Fut>(every: Duration, mut round: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut beat = interval(every);
    // A late round is not followed by a burst of rounds to catch up: the beat moves on.
    beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        beat.tick().await;
        round().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::*;

    /// Rounds of 200 ms every 300 ms start 300 ms apart, not 500 (round plus interval); a round
    /// longer than the beat is followed at once by the next.
    #[tokio::test]
    async fn a_round_starts_on_the_beat_whatever_the_last_took() {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let begin = Instant::now();
        let seen = starts.clone();
        let rounds = on_beat(Duration::from_millis(300), move || {
            let seen = seen.clone();
            async move {
                let n = {
                    let mut s = seen.lock().unwrap();
                    s.push(begin.elapsed());
                    s.len()
                };
                // The fourth round runs long.
                let work = if n == 4 { 500 } else { 200 };
                tokio::time::sleep(Duration::from_millis(work)).await;
            }
        });
        let _ = tokio::time::timeout(Duration::from_millis(1650), rounds).await;
        let starts = starts.lock().unwrap().clone();
        let ms: Vec<u128> = starts.iter().map(|d| d.as_millis()).collect();
        assert!(ms.len() >= 5, "{ms:?}");
        // On the beat: 0, 300, 600, 900; then right after the long fourth ends (1400).
        for (i, expected) in [0u128, 300, 600, 900, 1400].iter().enumerate() {
            assert!(
                ms[i] >= *expected && ms[i] < expected + 120,
                "round {i} started at {} ms, expected about {expected}: {ms:?}",
                ms[i]
            );
        }
    }
}
