//! Recording an operation: its items in order and the audit row saying who asked, in the
//! caller's transaction. The worker picks it up once that transaction commits.

use diesel::prelude::*;

use super::payload::Job;
use super::StepKind;
use crate::models::audit;
use crate::models::operation::Operation;
use crate::models::operation_item::OperationItem;

/// One item to record: its step, what it acts on, and the node it concerns when that is known
/// when it is recorded (where placement put a new instance, with its SSH port; the node a
/// move leaves).
pub struct Step<'a> {
    pub action: StepKind,
    pub target: &'a str,
    pub instance_id: Option<i64>,
    pub node: Option<&'a str>,
    pub ssh_port: Option<i32>,
}

impl<'a> Step<'a> {
    pub fn new(action: StepKind, target: &'a str, instance_id: Option<i64>) -> Self {
        Step {
            action,
            target,
            instance_id,
            node: None,
            ssh_port: None,
        }
    }

    /// Where its instance is (placed, or made earlier), when it is anywhere yet: the node and
    /// SSH port the item shows at once.
    pub fn placed(self, at: Option<(&'a str, i32)>) -> Self {
        Step {
            node: at.map(|(node, _)| node),
            ssh_port: at.map(|(_, port)| port),
            ..self
        }
    }

    /// The node the item acts on (for a move, the node it leaves): the worker runs items of
    /// different nodes at once, and a move resumed after its commit finds there the copies it
    /// still has to delete.
    pub fn on(self, node: &'a str) -> Self {
        Step {
            node: Some(node),
            ..self
        }
    }
}

/// The audit row of an operation: who asked for what on which object. Its detail gets the
/// operation's id as `operation`.
pub struct Audit<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub object_kind: &'a str,
    pub object: &'a str,
    pub detail: serde_json::Value,
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
