//! Operations as LXD shows them: `async` answers, `/1.0/operations` (by status), `/{id}` and
//! `/{id}/wait`, each through the same actions as `/api/v1/operations`.

use actix_web::{web, HttpRequest, HttpResponse};
use cohort_proto::api::operations::{Operation, OperationKind, OperationStatus};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use uuid::Uuid;

use std::time::Duration;

use super::exec_sessions::ExecSessions;
use super::instances::Listing;
use super::reply::{sync, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::error::ActionError;
use crate::jobs::operations;

/// Longest one `/wait` on an exec session lasts (pylxd waits with no timeout; it asks again).
const MAX_SESSION_WAIT: Duration = Duration::from_secs(3600);

fn status(status: OperationStatus) -> (&'static str, u16) {
    match status {
        OperationStatus::Pending => ("Pending", 105),
        OperationStatus::Running => ("Running", 103),
        OperationStatus::Success => ("Success", 200),
        OperationStatus::Failure => ("Failure", 400),
        OperationStatus::Cancelled => ("Cancelled", 401),
    }
}

/// `api.Operation` for one of Cohort's operations.
pub fn lxd_operation(op: &Operation) -> Value {
    let (name, code) = status(op.status);
    let kind = serde_json::to_value(op.kind).unwrap_or_default();
    let mut instances: Vec<String> = op
        .items
        .iter()
        .map(|i| format!("/1.0/instances/{}", i.target))
        .collect();
    if instances.is_empty() {
        instances.push(format!("/1.0/instances/{}", op.target));
    }
    json!({
        "id": op.id,
        "class": "task",
        "description": kind.as_str().unwrap_or("operation").replace('_', " "),
        "created_at": op.created_at,
        "updated_at": op.updated_at,
        "status": name,
        "status_code": code,
        "resources": {"instances": instances},
        "metadata": {},
        "may_cancel": false,
        "err": error_of(op),
        "location": "cohort",
    })
}

/// The `err` of an operation that did not succeed: its own error, else its first failed step's,
/// else what happened to it. pylxd raises with this text when a wait ends in `Failure`, so it
/// is never empty there.
fn error_of(op: &Operation) -> String {
    if let Some(error) = op.error.as_ref().filter(|e| !e.is_empty()) {
        return error.clone();
    }
    let step = op
        .items
        .iter()
        .filter_map(|i| Some((i, i.error.as_ref().filter(|e| !e.is_empty())?)))
        .next();
    match (op.status, step) {
        (OperationStatus::Failure | OperationStatus::Cancelled, Some((item, error))) => {
            format!("{}: {error}", item.target)
        }
        (OperationStatus::Failure, None) => format!("the operation on {} failed", op.target),
        (OperationStatus::Cancelled, None) => {
            format!("the operation on {} was cancelled", op.target)
        }
        _ => String::new(),
    }
}

/// LXD's `202 Accepted` naming the operation that carries the change.
pub fn accepted(op: &Operation) -> HttpResponse {
    accepted_as(&op.id.to_string(), lxd_operation(op))
}

/// LXD's `202 Accepted` envelope for the operation `id`, described by `metadata`.
pub fn accepted_as(id: &str, metadata: Value) -> HttpResponse {
    let url = format!("/1.0/operations/{id}");
    HttpResponse::Accepted()
        .insert_header((actix_web::http::header::LOCATION, url.clone()))
        .json(json!({
            "type": "async",
            "status": "Operation created",
            "status_code": 100,
            "operation": url,
            "error_code": 0,
            "error": "",
            "metadata": metadata,
        }))
}

/// How long an operation answered as already done stays readable, and how many are kept: pylxd
/// reads every operation again after waiting on it, and `lxc operation show` may come later.
const KEPT_DONE: Duration = Duration::from_secs(300);
const MAX_DONE: usize = 4096;

/// Operations for changes made before the answer (snapshots, config, image uploads): Cohort's
/// actions for them finish in the request, so no job records them. They are kept here, in
/// memory, for [`KEPT_DONE`], readable by the user they were made for.
#[derive(Default)]
pub struct DoneOperations(std::sync::Mutex<std::collections::VecDeque<Done>>);

struct Done {
    at: std::time::Instant,
    user_id: i64,
    id: Uuid,
    operation: Value,
}

impl DoneOperations {
    /// LXD's `202 Accepted` naming an operation that already succeeded, which the client takes
    /// as done; `resources` and `metadata` as LXD gives them for the change.
    pub fn answer(
        &self,
        user_id: i64,
        description: &str,
        resources: Value,
        metadata: Value,
    ) -> HttpResponse {
        let id = Uuid::new_v4();
        let now = chrono::Utc::now();
        let operation = json!({
            "id": id,
            "class": "task",
            "description": description,
            "created_at": now,
            "updated_at": now,
            "status": "Success",
            "status_code": 200,
            "resources": resources,
            "metadata": metadata,
            "may_cancel": false,
            "err": "",
            "location": "cohort",
        });
        if let Ok(mut kept) = self.0.lock() {
            let now = std::time::Instant::now();
            while kept
                .front()
                .is_some_and(|d| now.duration_since(d.at) > KEPT_DONE || kept.len() >= MAX_DONE)
            {
                kept.pop_front();
            }
            kept.push_back(Done {
                at: now,
                user_id,
                id,
                operation: operation.clone(),
            });
        }
        accepted_as(&id.to_string(), operation)
    }

    /// [`DoneOperations::answer`] for a change to one instance.
    pub fn instance_changed(
        &self,
        user_id: i64,
        description: &str,
        instance: &str,
    ) -> HttpResponse {
        self.answer(
            user_id,
            description,
            json!({"instances": [format!("/1.0/instances/{instance}")]}),
            json!({}),
        )
    }

    fn get(&self, id: Uuid, user_id: i64) -> Option<Value> {
        let kept = self.0.lock().ok()?;
        kept.iter()
            .find(|d| d.id == id && d.user_id == user_id && d.at.elapsed() <= KEPT_DONE)
            .map(|d| d.operation.clone())
    }
}

fn id_of(raw: &str) -> Result<Uuid, ActionError> {
    raw.parse()
        .map_err(|_| ActionError::NotFound("Operation".into()))
}

/// `GET /1.0/operations`: the caller's operations grouped by lower-case status.
pub async fn list(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let recursive = Listing::of(&req).recursion >= 1;
    let mut groups: Map<String, Value> = Map::new();
    for op in operations::list(&ctl, client.0).await? {
        let key = status(op.status).0.to_lowercase();
        let entry = if recursive {
            lxd_operation(&op)
        } else {
            json!(format!("/1.0/operations/{}", op.id))
        };
        if let Some(list) = groups
            .entry(key)
            .or_insert_with(|| json!([]))
            .as_array_mut()
        {
            list.push(entry);
        }
    }
    Ok(sync(groups))
}

/// An operation as LXD gives it; a publish that succeeded names the image it made in its
/// metadata (`fingerprint`), which `lxc publish` prints and pylxd reads the image by.
pub(super) async fn shown(
    ctl: &Ctl,
    bearer: crate::accounts::auth::Bearer,
    op: &Operation,
) -> Value {
    let mut shown = lxd_operation(op);
    if op.kind == OperationKind::PublishImage && op.status == OperationStatus::Success {
        if let Ok(image) = crate::images::catalog::get(ctl, bearer, op.target.clone()).await {
            shown["metadata"] = json!({"fingerprint": image.fingerprint, "size": image.size_bytes});
        }
    }
    shown
}

pub async fn get(
    ctl: Ctl,
    sessions: web::Data<ExecSessions>,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    id: web::Path<String>,
) -> LxdReply {
    let id = id_of(&id)?;
    let bearer = client.0.clone();
    let caller = caller_of(&ctl, client).await?;
    if let Some(session) = sessions.get(id, caller.user.id) {
        return Ok(sync(session.lxd_operation()));
    }
    if let Some(op) = done.get(id, caller.user.id) {
        return Ok(sync(op));
    }
    let op = operations::get(&ctl, caller, id).await?;
    Ok(sync(shown(&ctl, bearer, &op).await))
}

#[derive(Debug, Deserialize)]
pub struct WaitQuery {
    /// Seconds; LXD's -1, or none (the clients' default: pylxd sends none), is "as long as it
    /// takes", bounded here by the action's longest wait, not its default one (30 s): a
    /// client that takes a wait's answer as the end would go on while the change still runs.
    #[serde(default)]
    timeout: Option<i64>,
}

pub async fn wait(
    ctl: Ctl,
    sessions: web::Data<ExecSessions>,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    id: web::Path<String>,
    query: web::Query<WaitQuery>,
) -> LxdReply {
    let id = id_of(&id)?;
    let bearer = client.0.clone();
    let caller = caller_of(&ctl, client).await?;
    let timeout = query.timeout.and_then(|t| u32::try_from(t).ok());
    if let Some(session) = sessions.get(id, caller.user.id) {
        let limit = timeout.map_or(MAX_SESSION_WAIT, |t| {
            Duration::from_secs(t.into()).min(MAX_SESSION_WAIT)
        });
        session.wait(limit).await;
        return Ok(sync(session.lxd_operation()));
    }
    if let Some(op) = done.get(id, caller.user.id) {
        return Ok(sync(op));
    }
    let timeout = timeout.map_or(operations::MAX_WAIT_S, |t| t.min(operations::MAX_WAIT_S));
    let op = operations::wait(&ctl, caller, id, Some(timeout)).await?;
    Ok(sync(shown(&ctl, bearer, &op).await))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn operation(status: OperationStatus, error: Option<&str>, step: Option<&str>) -> Operation {
        serde_json::from_value(json!({
            "id": Uuid::nil(),
            "kind": "delete_instance",
            "status": status,
            "created_by": "ann",
            "target": "py1",
            "progress": {"total": 1, "done": 0, "failed": 1},
            "items": [{
                "id": Uuid::nil(), "target": "py1", "node": "node1", "ssh_port": null,
                "status": status, "attempts": 1, "error": step,
            }],
            "error": error,
            "created_at": "2026-11-27T00:00:00Z",
            "updated_at": "2026-11-27T00:00:00Z",
        }))
        .expect("an operation")
    }

    #[test]
    fn an_operation_that_did_not_succeed_always_says_why() {
        let failed = |error, step| lxd_operation(&operation(OperationStatus::Failure, error, step));
        assert_eq!(failed(Some("no room"), Some("step"))["err"], "no room");
        assert_eq!(
            failed(None, Some("agent answered 500"))["err"],
            "py1: agent answered 500"
        );
        assert_eq!(failed(None, None)["err"], "the operation on py1 failed");
        let cancelled = lxd_operation(&operation(OperationStatus::Cancelled, None, None));
        assert_eq!(cancelled["err"], "the operation on py1 was cancelled");
        let done = lxd_operation(&operation(OperationStatus::Success, None, None));
        assert_eq!(done["err"], "");
    }
}
