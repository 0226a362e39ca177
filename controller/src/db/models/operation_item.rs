//! `operation_items`: the steps of an operation; each id is that step's idempotency key.

use chrono::{DateTime, Utc};
use cohort_proto::api::operations::OperationStatus;
use diesel::prelude::*;
use uuid::Uuid;

use crate::db::enums::StepKind;
use crate::db::schema::{operation_items, operations};

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

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = operation_items, check_for_backend(diesel::pg::Pg))]
pub struct OperationItem {
    pub id: Uuid,
    pub operation_id: Uuid,
    pub position: i32,
    pub action: StepKind,
    pub target: String,
    pub instance_id: Option<i64>,
    pub node_name: Option<String>,
    pub ssh_port: Option<i32>,
    pub status: OperationStatus,
    pub attempts: i32,
    pub error: Option<String>,
    pub updated_at: DateTime<Utc>,
}

impl OperationItem {
    pub fn insert(
        conn: &mut PgConnection,
        operation_id: Uuid,
        position: i32,
        step: &Step<'_>,
    ) -> QueryResult<OperationItem> {
        diesel::insert_into(operation_items::table)
            .values((
                operation_items::id.eq(Uuid::new_v4()),
                operation_items::operation_id.eq(operation_id),
                operation_items::position.eq(position),
                operation_items::action.eq(step.action),
                operation_items::target.eq(step.target),
                operation_items::instance_id.eq(step.instance_id),
                operation_items::node_name.eq(step.node),
                operation_items::ssh_port.eq(step.ssh_port),
            ))
            .returning(OperationItem::as_returning())
            .get_result(conn)
    }

    pub fn for_operation(
        conn: &mut PgConnection,
        operation_id: Uuid,
    ) -> QueryResult<Vec<OperationItem>> {
        operation_items::table
            .filter(operation_items::operation_id.eq(operation_id))
            .order(operation_items::position)
            .select(OperationItem::as_select())
            .load(conn)
    }

    /// The instances the last evacuation of node `node` moved away: the `evacuate_move` items
    /// of its latest `evacuate_node` operation that succeeded (what `restore` brings back).
    pub fn moved_by_last_evacuation(conn: &mut PgConnection, node: &str) -> QueryResult<Vec<i64>> {
        use crate::db::schema::operations;
        let last: Option<Uuid> = operations::table
            .filter(operations::kind.eq("evacuate_node"))
            .filter(operations::target.eq(node))
            .order(operations::created_at.desc())
            .select(operations::id)
            .first(conn)
            .optional()?;
        let Some(last) = last else {
            return Ok(Vec::new());
        };
        let ids: Vec<Option<i64>> = operation_items::table
            .filter(operation_items::operation_id.eq(last))
            .filter(operation_items::action.eq(StepKind::EvacuateMove))
            .filter(operation_items::status.eq(OperationStatus::Success))
            .select(operation_items::instance_id)
            .load(conn)?;
        Ok(ids.into_iter().flatten().collect())
    }

    /// Counts an attempt before the step runs, so a crash mid-step still shows.
    pub fn start_attempt(conn: &mut PgConnection, id: Uuid) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set((
                operation_items::status.eq(OperationStatus::Running),
                operation_items::attempts.eq(operation_items::attempts + 1),
            ))
            .execute(conn)
    }

    pub fn set_placement(
        conn: &mut PgConnection,
        id: Uuid,
        node_name: &str,
        ssh_port: i32,
    ) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set((
                operation_items::node_name.eq(node_name),
                operation_items::ssh_port.eq(ssh_port),
            ))
            .execute(conn)
    }

    pub fn finish(
        conn: &mut PgConnection,
        id: Uuid,
        status: OperationStatus,
        error: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set((
                operation_items::status.eq(status),
                operation_items::error.eq(error),
            ))
            .execute(conn)
    }

    /// Records a failed attempt that will be retried.
    /// The item cannot run yet (`why`): it goes back to pending, and this run was no attempt,
    /// so a long wait does not use up the retries of a later failure.
    pub fn wait(conn: &mut PgConnection, id: Uuid, why: &str) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set((
                operation_items::status.eq(OperationStatus::Pending),
                operation_items::error.eq(why),
                operation_items::attempts.eq(operation_items::attempts - 1),
            ))
            .filter(operation_items::attempts.gt(0))
            .execute(conn)
    }

    pub fn note_error(conn: &mut PgConnection, id: Uuid, error: &str) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set(operation_items::error.eq(error))
            .execute(conn)
    }

    /// The node an item acts on, known when it is recorded (an image import): the worker runs
    /// items of different nodes at once.
    pub fn set_node(conn: &mut PgConnection, id: Uuid, node_name: &str) -> QueryResult<usize> {
        diesel::update(operation_items::table.find(id))
            .set(operation_items::node_name.eq(node_name))
            .execute(conn)
    }

    /// The creates of instance `instance_id` not yet done (pending or running).
    pub fn pending_creates(conn: &mut PgConnection, instance_id: i64) -> QueryResult<Vec<Uuid>> {
        operation_items::table
            .filter(operation_items::instance_id.eq(instance_id))
            .filter(operation_items::action.eq(StepKind::Create))
            .filter(
                operation_items::status
                    .eq_any([OperationStatus::Pending, OperationStatus::Running]),
            )
            .select(operation_items::id)
            .load::<Uuid>(conn)
    }

    /// Whether an unfinished operation (pending or running) has an item for instance
    /// `instance_id`.
    pub fn unfinished_for(conn: &mut PgConnection, instance_id: i64) -> QueryResult<bool> {
        diesel::select(diesel::dsl::exists(
            operation_items::table
                .inner_join(operations::table)
                .filter(operation_items::instance_id.eq(instance_id))
                .filter(
                    operations::status.eq_any([OperationStatus::Pending, OperationStatus::Running]),
                ),
        ))
        .get_result(conn)
    }

    /// Whether `key` (a container's idempotency key) is the id of a create item of instance
    /// `instance_id`: the container was made for this very instance, by an earlier create.
    pub fn made_for(conn: &mut PgConnection, key: &str, instance_id: i64) -> QueryResult<bool> {
        let Ok(id) = key.parse::<Uuid>() else {
            return Ok(false);
        };
        diesel::select(diesel::dsl::exists(
            operation_items::table
                .find(id)
                .filter(operation_items::instance_id.eq(instance_id))
                .filter(operation_items::action.eq(StepKind::Create)),
        ))
        .get_result(conn)
    }
}
