//! `GET /1.0/events`: the websocket the `lxc` client listens on while it waits for an operation,
//! and `lxc monitor` / `incus monitor` read. Cohort's operations live in PostgreSQL, so the
//! stream polls the caller's operations and sends an `operation` event whenever one is new or
//! changed status, and when one that creates, starts, stops or deletes instances succeeds, a
//! `lifecycle` event per instance as LXD names them (`instance-created`, `instance-started`,
//! `instance-stopped`, `instance-deleted`); `?type=` keeps only the kinds asked for. It ends
//! when the client goes.

use std::collections::HashMap;
use std::time::Duration;

use actix_web::{web, HttpRequest};
use chrono::Utc;
use serde_json::json;
use uuid::Uuid;

use super::exec_sessions::ExecSessions;
use super::operations::shown;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::accounts::auth::Bearer;
use crate::instances::manage;
use crate::jobs::operations;
use cohort_proto::api::instances::ObservedState;
use cohort_proto::api::operations::{Operation, OperationKind, OperationStatus};

/// The kinds of event a stream sends: those of `?type=a,b`, or all.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    operation: bool,
    lifecycle: bool,
}

impl Wanted {
    fn of(req: &HttpRequest) -> Self {
        let asked: Vec<String> = url::form_urlencoded::parse(req.query_string().as_bytes())
            .filter(|(k, _)| k == "type")
            .flat_map(|(_, v)| v.split(',').map(str::to_string).collect::<Vec<_>>())
            .filter(|t| !t.is_empty())
            .collect();
        let all = asked.is_empty();
        Wanted {
            operation: all || asked.iter().any(|t| t == "operation"),
            lifecycle: all || asked.iter().any(|t| t == "lifecycle"),
        }
    }
}

/// How often the stream looks for changed operations.
const POLL: Duration = Duration::from_millis(500);
/// Longest a stream lives; the client reconnects when it needs one again.
const MAX_LIFE: Duration = Duration::from_secs(6 * 3600);

pub async fn events(
    ctl: Ctl,
    sessions: web::Data<ExecSessions>,
    client: LxdClient,
    req: HttpRequest,
    body: web::Payload,
) -> LxdReply {
    let bearer = client.0.clone();
    // Refused before the upgrade, as LXD refuses an untrusted client.
    let user_id = caller_of(&ctl, client).await?.user.id;
    let wanted = Wanted::of(&req);
    let mut ended = sessions.subscribe();
    let (response, mut session, mut incoming) =
        actix_ws::handle(&req, body).map_err(|e| LxdError::BadRequest(e.to_string()))?;
    actix_web::rt::spawn(async move {
        let mut seen: HashMap<Uuid, String> = HashMap::new();
        let started = tokio::time::Instant::now();
        let mut first = true;
        let mut tick = tokio::time::interval(POLL);
        while started.elapsed() < MAX_LIFE {
            tokio::select! {
                message = futures_util::StreamExt::next(&mut incoming) => match message {
                    Some(Ok(actix_ws::Message::Ping(bytes))) => {
                        if session.pong(&bytes).await.is_err() { break; }
                    }
                    Some(Ok(actix_ws::Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {}
                },
                id = ended.recv() => {
                    let Ok(id) = id else { continue };
                    if !wanted.operation { continue }
                    if let Some(exec) = sessions.get(id, user_id) {
                        let event = operation_event(exec.lxd_operation());
                        if session.text(event.to_string()).await.is_err() { break; }
                    }
                }
                _ = tick.tick() => {
                    if send_changes(&ctl, &bearer, &mut seen, first, wanted, &mut session).await.is_err() {
                        break;
                    }
                    first = false;
                }
            }
        }
        let _ = session.close(None).await;
    });
    Ok(response)
}

fn operation_event(operation: serde_json::Value) -> serde_json::Value {
    json!({
        "type": "operation",
        "timestamp": Utc::now(),
        "location": "cohort",
        "project": "default",
        "metadata": operation,
    })
}

/// LXD's lifecycle action for each instance an operation that succeeded changed: what its kind
/// did, and for a state change what state the instance is in now.
async fn lifecycle_actions(
    ctl: &Ctl,
    bearer: &Bearer,
    op: &Operation,
) -> Vec<(String, &'static str)> {
    let mut targets: Vec<String> = op.items.iter().map(|i| i.target.clone()).collect();
    if targets.is_empty() {
        targets.push(op.target.clone());
    }
    let mut actions = Vec::new();
    for name in targets {
        let action = match op.kind {
            OperationKind::CreateInstance => "instance-created",
            OperationKind::DeleteInstance => "instance-deleted",
            OperationKind::ChangeInstanceState => {
                match manage::get(ctl, bearer.clone(), name.clone()).await {
                    Ok(i) if i.observed_state == ObservedState::Running => "instance-started",
                    Ok(i) if i.observed_state == ObservedState::Stopped => "instance-stopped",
                    _ => continue,
                }
            }
            _ => continue,
        };
        actions.push((name, action));
    }
    actions
}

fn lifecycle_event(name: &str, action: &str) -> serde_json::Value {
    json!({
        "type": "lifecycle",
        "timestamp": Utc::now(),
        "location": "cohort",
        "project": "default",
        "metadata": {
            "action": action,
            "source": format!("/1.0/instances/{name}"),
            "context": {},
        },
    })
}

/// Sends an event for every operation whose status differs from what the stream last saw;
/// on the first pass it only records them (the client refreshes the one it waits for itself).
async fn send_changes(
    ctl: &Ctl,
    bearer: &Bearer,
    seen: &mut HashMap<Uuid, String>,
    first: bool,
    wanted: Wanted,
    session: &mut actix_ws::Session,
) -> Result<(), actix_ws::Closed> {
    // A passing database error skips one poll; a revoked certificate ends the stream.
    let ops = match operations::list(ctl, bearer.clone()).await {
        Ok(ops) => ops,
        Err(crate::error::ActionError::Unauthenticated(_)) => return Err(actix_ws::Closed),
        Err(_) => return Ok(()),
    };
    for op in ops {
        let status = format!("{:?}", op.status);
        if seen.get(&op.id) == Some(&status) {
            continue;
        }
        seen.insert(op.id, status);
        if first {
            continue;
        }
        if wanted.operation {
            // `lxc publish` reads the fingerprint from the event that ends its wait.
            let event = operation_event(shown(ctl, bearer.clone(), &op).await);
            session.text(event.to_string()).await?;
        }
        if wanted.lifecycle && op.status == OperationStatus::Success {
            for (name, action) in lifecycle_actions(ctl, bearer, &op).await {
                session
                    .text(lifecycle_event(&name, action).to_string())
                    .await?;
            }
        }
    }
    Ok(())
}
