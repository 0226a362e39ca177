//! Use asked, not inferred (issue 43): before a pass stops a container for idleness, the
//! reclaimer asks the node what the container is doing: its terminals' last input (SSH
//! sessions, JupyterLab terminals), its processes above `reclaim.busy_cpu_percent`, and
//! JupyterLab's own kernels and terminals. What it hears is recorded (`instance_activity`,
//! `instance_usage.notebook_active_at`) on the database's clock, and the pass then finds the
//! container in use. Relayed notebook traffic never counts: a tab left open polls by itself.
//!
//! Only the containers the pass would otherwise reclaim are asked, all at once (each answer
//! takes the agent's one-second CPU sample). An offline node is not asked and the pass decides
//! on what it knew. A container whose node was asked and did not answer (a busy node, past
//! [`ASK_TIMEOUT`]), or whose JupyterLab did not answer its node, is not known idle: the pass
//! spares it, for one idle window at most ([`Unanswered`]).

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cohort_proto::activity::InstanceActivity as Seen;
use futures_util::future::join_all;

use crate::agent_client::NodeAgent;
use crate::app::state::{connect_node, Controller};
use crate::db::models::instance_activity::{Heard, InstanceActivity};
use crate::db::models::instance_usage::InstanceUsage;
use crate::db::models::node::Node;
use crate::db::queries::reclaim_use::{self, Candidate};
use crate::error::ActionResult;

/// Longest wait for one node's answer: one LXD call, the one-second CPU sample, and JupyterLab's
/// answer (the agent waits 7 s for it), on a node loaded enough to slow all three.
const ASK_TIMEOUT: Duration = Duration::from_secs(20);

/// Asks the nodes about every container the pass would reclaim for idleness and records what
/// they say; returns the containers asked that got no answer.
pub async fn refresh(ctl: &Controller) -> ActionResult<HashSet<i64>> {
    let minute_s = ctl.config.reclaim.minute_s.max(1) as i64;
    let cpu_percent = ctl.config.reclaim.busy_cpu_percent;
    let agents = ctl.agents.clone();
    let asked: Vec<(Candidate, Arc<dyn NodeAgent>)> = ctl
        .db(move |conn| {
            let mut nodes: HashMap<i64, Option<Arc<dyn NodeAgent>>> = HashMap::new();
            let mut asked = Vec::new();
            for c in reclaim_use::idle_candidates(conn, minute_s)? {
                let agent = match nodes.entry(c.node_id) {
                    Entry::Occupied(known) => known.get().clone(),
                    Entry::Vacant(slot) => {
                        let node = Node::find(conn, c.node_id)?;
                        // An offline node is not asked: the pass decides on what it knew.
                        let agent = connect_node(agents.as_ref(), conn, &node).ok();
                        slot.insert(agent).clone()
                    }
                };
                if let Some(agent) = agent {
                    asked.push((c, agent));
                }
            }
            Ok(asked)
        })
        .await?;
    if asked.is_empty() {
        return Ok(HashSet::new());
    }
    let answers = join_all(asked.iter().map(|(c, agent)| {
        let call = agent.activity(c.name.clone(), cpu_percent);
        async move {
            match tokio::time::timeout(ASK_TIMEOUT, call).await {
                Ok(Ok(seen)) => Some(seen),
                Ok(Err(e)) => {
                    tracing::info!(instance = %c.name, "asking for its activity: {e}");
                    None
                }
                Err(_) => {
                    tracing::info!(instance = %c.name, "asking for its activity: no answer");
                    None
                }
            }
        }
    }))
    .await;
    let mut unanswered = HashSet::new();
    let heard: Vec<(i64, String, Seen)> = asked
        .into_iter()
        .zip(answers)
        .filter_map(|((c, _), seen)| {
            if seen.as_ref().is_some_and(|s| s.jupyter_unanswered) {
                tracing::info!(instance = %c.name, "asking for its activity: JupyterLab did not answer its node");
            }
            if seen.as_ref().is_none_or(|s| s.jupyter_unanswered) {
                unanswered.insert(c.id);
            }
            Some((c.id, c.name, seen?))
        })
        .collect();
    ctl.db(move |conn| {
        for (id, name, seen) in &heard {
            record(conn, *id, name, seen)?;
        }
        Ok(())
    })
    .await?;
    Ok(unanswered)
}

/// Since when each container has gone unanswered, pass after pass (the reclaimer's loop keeps
/// it). A node slow to answer about a container delays its reclaim; it cannot keep it forever:
/// once the container has gone unanswered for a whole idle window, the pass decides on what it
/// last heard.
#[derive(Debug, Default)]
pub struct Unanswered {
    since: HashMap<i64, chrono::DateTime<chrono::Utc>>,
}

impl Unanswered {
    /// Takes a pass's unanswered containers: those answered since are forgotten.
    pub fn update(&mut self, now: chrono::DateTime<chrono::Utc>, unanswered: &HashSet<i64>) {
        self.since.retain(|id, _| unanswered.contains(id));
        for id in unanswered {
            self.since.entry(*id).or_insert(now);
        }
    }

    /// The containers unanswered now, with how long they have been, for one pass.
    pub fn spared(&self, now: chrono::DateTime<chrono::Utc>) -> Spared {
        Spared(
            self.since
                .iter()
                .map(|(id, since)| (*id, now - *since))
                .collect(),
        )
    }
}

/// For one pass: each container unanswered, and for how long.
#[derive(Debug, Clone, Default)]
pub struct Spared(HashMap<i64, chrono::Duration>);

impl Spared {
    /// Whether the pass spares container `id` whose idle window is `window`: unanswered, for
    /// less than that window.
    pub fn spares(&self, id: i64, window: chrono::Duration) -> bool {
        self.0.get(&id).is_some_and(|long| *long < window)
    }
}

fn record(conn: &mut diesel::PgConnection, id: i64, name: &str, seen: &Seen) -> ActionResult<()> {
    let busy = seen.busy_processes.first().map(|p| {
        format!(
            "{} (pid {}) at {} % of a core",
            p.command, p.pid, p.cpu_percent
        )
    });
    if seen.tty_input_age_s.is_some() || busy.is_some() {
        tracing::debug!(instance = %name, tty_input_age_s = ?seen.tty_input_age_s, busy = ?busy, "activity");
    }
    InstanceActivity::record(
        conn,
        id,
        &Heard {
            tty_input_age_s: seen.tty_input_age_s,
            busy_process: busy,
        },
    )?;
    if let Some(age) = notebook_age(seen) {
        InstanceUsage::note_notebook_use(conn, id, age)?;
    }
    Ok(())
}

/// Seconds since JupyterLab's last real use: 0 while a kernel executes, else its kernels' and
/// terminals' latest `last_activity`.
fn notebook_age(seen: &Seen) -> Option<u64> {
    let j = seen.jupyter.as_ref()?;
    if j.kernels_executing > 0 {
        return Some(0);
    }
    match (j.kernel_activity_age_s, j.terminal_activity_age_s) {
        (Some(k), Some(t)) => Some(k.min(t)),
        (k, t) => k.or(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_proto::activity::JupyterActivity;

    #[test]
    fn an_unanswered_container_is_spared_for_one_window_and_forgotten_once_answered() {
        let t0: chrono::DateTime<chrono::Utc> = "2026-11-27T12:00:00Z".parse().unwrap();
        let window = chrono::Duration::seconds(300);
        let mut u = Unanswered::default();
        u.update(t0, &HashSet::from([1, 2]));
        let now = u.spared(t0);
        assert!(now.spares(1, window) && now.spares(2, window));
        assert!(!now.spares(3, window), "answered");
        let later = t0 + chrono::Duration::seconds(299);
        u.update(later, &HashSet::from([1]));
        assert!(u.spared(later).spares(1, window), "inside its window");
        assert!(!u.spared(later).spares(2, window), "answered since");
        let past = t0 + window;
        u.update(past, &HashSet::from([1, 2]));
        assert!(
            !u.spared(past).spares(1, window),
            "unanswered a whole window"
        );
        assert!(u.spared(past).spares(2, window), "its window starts again");
    }

    #[test]
    fn an_executing_kernel_is_use_now_and_polling_is_nothing() {
        let mut seen = Seen::default();
        assert_eq!(notebook_age(&seen), None, "no JupyterLab");
        seen.jupyter = Some(JupyterActivity::default());
        assert_eq!(notebook_age(&seen), None, "a tab polling, no kernel");
        seen.jupyter = Some(JupyterActivity {
            kernels_executing: 0,
            kernel_activity_age_s: Some(600),
            terminal_activity_age_s: Some(30),
        });
        assert_eq!(notebook_age(&seen), Some(30));
        seen.jupyter = Some(JupyterActivity {
            kernels_executing: 1,
            kernel_activity_age_s: Some(900),
            terminal_activity_age_s: None,
        });
        assert_eq!(notebook_age(&seen), Some(0));
    }
}
