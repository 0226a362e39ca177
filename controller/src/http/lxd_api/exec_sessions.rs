//! The exec sessions this controller relays, kept in memory: each is an operation of the
//! LXD-style API (class `websocket`) whose secrets the client attaches with, mapped to the
//! node's own session. A waiter follows the node's session to its end and announces it, so the
//! events stream and `/wait` answer as LXD does. A session lives in the controller process that
//! started it; the client reaches the same one, as it keeps one connection address.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use cohort_proto::agent::ExecSessionState;
use serde_json::{json, Value};
use tokio::sync::{broadcast, watch};
use uuid::Uuid;

use crate::agent_client::NodeAgent;

/// Most sessions open at once, longest one is followed, and how long an ended one is kept for
/// the client to read its exit code.
const MAX_OPEN: usize = 1024;
const MAX_LIFE: Duration = Duration::from_secs(12 * 3600);
const KEPT_ENDED: Duration = Duration::from_secs(60);
/// One wait on the node; and how many failed waits in a row end the session.
const WAIT_SLICE_S: u32 = 30;
const MAX_FAILED_WAITS: u32 = 5;

/// One relayed exec.
pub struct ExecSession {
    pub id: Uuid,
    pub user_id: i64,
    pub instance: String,
    pub node: String,
    pub agent: Arc<dyn NodeAgent>,
    /// The node's LXD operation.
    pub node_operation: String,
    /// Per websocket (`0`, `1`, `2`, `control`): the client's secret and the node's.
    secrets: BTreeMap<String, (String, String)>,
    attached: Mutex<HashSet<String>>,
    pub command: Vec<String>,
    pub interactive: bool,
    pub created_at: DateTime<Utc>,
    end: watch::Sender<Option<(ExecSessionState, DateTime<Utc>)>>,
}

impl ExecSession {
    /// A session for the node's, with a fresh secret of ours for each of its websockets.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        user_id: i64,
        instance: String,
        node: String,
        agent: Arc<dyn NodeAgent>,
        node_session: cohort_proto::agent::ExecSession,
        command: Vec<String>,
        interactive: bool,
    ) -> Self {
        let secrets = node_session
            .fds
            .into_iter()
            .map(|(fd, theirs)| (fd, (hex::encode(rand::random::<[u8; 32]>()), theirs)))
            .collect();
        ExecSession {
            id: Uuid::new_v4(),
            user_id,
            instance,
            node,
            agent,
            node_operation: node_session.operation,
            secrets,
            attached: Mutex::new(HashSet::new()),
            command,
            interactive,
            created_at: Utc::now(),
            end: watch::channel(None).0,
        }
    }

    /// The node's secret for the websocket `secret` names; each attaches once.
    pub fn attach(&self, secret: &str) -> Option<String> {
        let (fd, (_, theirs)) = self.secrets.iter().find(|(_, (ours, _))| {
            // Compared whole, in constant time per candidate.
            ours.len() == secret.len()
                && ours
                    .bytes()
                    .zip(secret.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })?;
        let mut attached = self.attached.lock().unwrap_or_else(|p| p.into_inner());
        attached.insert(fd.clone()).then(|| theirs.clone())
    }

    pub fn ended(&self) -> Option<ExecSessionState> {
        self.end.borrow().as_ref().map(|(state, _)| state.clone())
    }

    /// Waits up to `timeout` for the end.
    pub async fn wait(&self, timeout: Duration) {
        let mut rx = self.end.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|e| e.is_some())).await;
    }

    /// `api.Operation` for the session, as LXD shows an exec.
    pub fn lxd_operation(&self) -> Value {
        let end = self.end.borrow().clone();
        let fds: BTreeMap<&String, &String> = self
            .secrets
            .iter()
            .map(|(fd, (ours, _))| (fd, ours))
            .collect();
        let (status, code, err, updated) = match &end {
            None => ("Running", 103, String::new(), self.created_at),
            Some((state, at)) => match &state.error {
                Some(e) => ("Failure", 400, e.clone(), *at),
                None => ("Success", 200, String::new(), *at),
            },
        };
        let mut metadata = json!({
            "fds": fds,
            "command": self.command,
            "interactive": self.interactive,
        });
        if let Some(code) = end.as_ref().and_then(|(s, _)| s.exit_code) {
            metadata["return"] = json!(code);
        }
        json!({
            "id": self.id,
            "class": "websocket",
            "description": "Executing command",
            "created_at": self.created_at,
            "updated_at": updated,
            "status": status,
            "status_code": code,
            "resources": {"instances": [format!("/1.0/instances/{}", self.instance)]},
            "metadata": metadata,
            "may_cancel": false,
            "err": err,
            "location": self.node,
        })
    }
}

/// Every open session, and a channel announcing each one's end.
pub struct ExecSessions {
    open: Mutex<HashMap<Uuid, Arc<ExecSession>>>,
    ended: broadcast::Sender<Uuid>,
}

impl Default for ExecSessions {
    fn default() -> Self {
        ExecSessions {
            open: Mutex::new(HashMap::new()),
            ended: broadcast::channel(256).0,
        }
    }
}

impl ExecSessions {
    /// Keeps `session` and follows it to its end; `None` when too many are open.
    pub fn add(self: &Arc<Self>, session: ExecSession) -> Option<Arc<ExecSession>> {
        let session = Arc::new(session);
        {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let now = Utc::now();
            open.retain(|_, s| {
                let ended_long_ago =
                    s.end.borrow().as_ref().is_some_and(|(_, at)| {
                        (now - *at).to_std().unwrap_or_default() > KEPT_ENDED
                    });
                !ended_long_ago
            });
            if open.len() >= MAX_OPEN {
                return None;
            }
            open.insert(session.id, session.clone());
        }
        let (sessions, followed) = (self.clone(), session.clone());
        tokio::spawn(async move { sessions.follow(followed).await });
        Some(session)
    }

    /// The session `id` if `user_id` started it.
    pub fn get(&self, id: Uuid, user_id: i64) -> Option<Arc<ExecSession>> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&id).filter(|s| s.user_id == user_id).cloned()
    }

    /// The session `id`, whoever started it (its websockets are reached by secret, as LXD's).
    pub fn by_id(&self, id: Uuid) -> Option<Arc<ExecSession>> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&id).cloned()
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Uuid> {
        self.ended.subscribe()
    }

    /// Waits on the node until the session ends (or cannot be followed), then announces it.
    async fn follow(&self, session: Arc<ExecSession>) {
        let started = tokio::time::Instant::now();
        let mut failures = 0;
        let state = loop {
            if started.elapsed() > MAX_LIFE {
                break ExecSessionState {
                    finished: true,
                    exit_code: None,
                    error: Some("the exec session ran past its longest life".into()),
                };
            }
            match session
                .agent
                .exec_session_state(session.node_operation.clone(), WAIT_SLICE_S)
                .await
            {
                Ok(state) if state.finished => break state,
                Ok(_) => failures = 0,
                Err(e) => {
                    failures += 1;
                    if failures >= MAX_FAILED_WAITS {
                        break ExecSessionState {
                            finished: true,
                            exit_code: None,
                            error: Some(format!("node {}: {e}", session.node)),
                        };
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        session.end.send_replace(Some((state, Utc::now())));
        let _ = self.ended.send(session.id);
        // Dropped later by `add`, once a client has had time to read the exit code.
    }
}
