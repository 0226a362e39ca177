//! Recording an operation: its items in order and the audit row saying who asked, in the
//! caller's transaction. The worker picks it up once that transaction commits.

use diesel::prelude::*;

use super::payload::Job;
use crate::db::enums::{AuditAction, AuditObject, StepKind};
use crate::db::models::audit;
use crate::db::models::operation::Operation;
use crate::db::models::operation_item::OperationItem;
pub use crate::db::models::operation_item::Step;

/// The audit row of an operation: who asked for what on which object. Its detail gets the
/// operation's id as `operation`.
pub struct Audit<'a> {
    pub actor: &'a str,
    pub action: AuditAction,
    pub object_kind: AuditObject,
    pub object: &'a str,
    pub detail: serde_json::Value,
}

/// Enqueues `job` with one `kind` step for each of `instances` (name, id), as one operation on
/// `target`; `None` when there are none (nothing to do, no operation).
pub fn enqueue_each(
    conn: &mut PgConnection,
    job: &Job,
    created_by: Option<i64>,
    target: &str,
    kind: StepKind,
    instances: &[(String, i64)],
) -> QueryResult<Option<Operation>> {
    if instances.is_empty() {
        return Ok(None);
    }
    let steps: Vec<Step<'_>> = instances
        .iter()
        .map(|(name, id)| Step::new(kind, name, Some(*id)))
        .collect();
    enqueue(conn, job, created_by, target, &steps, None).map(Some)
}

/// Records an operation, its items and (when given) its audit row.
pub fn enqueue(
    conn: &mut PgConnection,
    job: &Job,
    created_by: Option<i64>,
    target: &str,
    steps: &[Step<'_>],
    audit: Option<Audit<'_>>,
) -> QueryResult<Operation> {
    let op = Operation::insert(conn, job.kind(), created_by, target, job.payload())?;
    for (position, step) in steps.iter().enumerate() {
        OperationItem::insert(conn, op.id, position as i32, step)?;
    }
    if let Some(Audit {
        actor,
        action,
        object_kind,
        object,
        mut detail,
    }) = audit
    {
        if let Some(fields) = detail.as_object_mut() {
            fields.insert("operation".into(), serde_json::json!(op.id));
        }
        audit::record(conn, actor, action, object_kind, object, detail)?;
    }
    Ok(op)
}
