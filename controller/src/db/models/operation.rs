//! `operations`: durable long actions, claimed by workers under a lease.

use chrono::{DateTime, Utc};
use cohort_proto::api::operations::{OperationKind, OperationStatus};
use diesel::prelude::*;
use uuid::Uuid;

use crate::db::schema::operations;

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = operations, check_for_backend(diesel::pg::Pg))]
pub struct Operation {
    pub id: Uuid,
    pub kind: OperationKind,
    pub status: OperationStatus,
    pub created_by: Option<i64>,
    pub target: String,
    pub payload: serde_json::Value,
    pub error: Option<String>,
    pub claimed_by: Option<String>,
    pub lease_until: Option<DateTime<Utc>>,
    pub run_after: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl Operation {
    pub fn insert(
        conn: &mut PgConnection,
        kind: OperationKind,
        created_by: Option<i64>,
        target: &str,
        payload: serde_json::Value,
    ) -> QueryResult<Operation> {
        diesel::insert_into(operations::table)
            .values((
                operations::id.eq(Uuid::new_v4()),
                operations::kind.eq(kind),
                operations::created_by.eq(created_by),
                operations::target.eq(target),
                operations::payload.eq(payload),
            ))
            .returning(Operation::as_returning())
            .get_result(conn)
    }

    pub fn find(conn: &mut PgConnection, id: Uuid) -> QueryResult<Option<Operation>> {
        operations::table
            .find(id)
            .select(Operation::as_select())
            .first(conn)
            .optional()
    }

    /// The unfinished (pending or running) operation of `kind` on `target`, if there is one.
    pub fn unfinished(
        conn: &mut PgConnection,
        kind: OperationKind,
        target: &str,
    ) -> QueryResult<Option<Operation>> {
        operations::table
            .filter(operations::kind.eq(kind))
            .filter(operations::target.eq(target))
            .filter(operations::status.eq_any([OperationStatus::Pending, OperationStatus::Running]))
            .select(Operation::as_select())
            .order(operations::created_at)
            .first(conn)
            .optional()
    }

    pub fn list(conn: &mut PgConnection, created_by: Option<i64>) -> QueryResult<Vec<Operation>> {
        let mut q = operations::table
            .select(Operation::as_select())
            .into_boxed();
        if let Some(user) = created_by {
            q = q.filter(operations::created_by.eq(user));
        }
        q.order(operations::created_at.desc()).limit(200).load(conn)
    }

    /// Claims one runnable operation for `worker` until `lease_until`: unfinished, due, and
    /// either unclaimed or with an expired lease. SKIP LOCKED lets workers claim side by side.
    pub fn claim(
        conn: &mut PgConnection,
        worker: &str,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> QueryResult<Option<Operation>> {
        conn.transaction(|conn| {
            let candidate = operations::table
                .filter(
                    operations::status.eq_any([OperationStatus::Pending, OperationStatus::Running]),
                )
                .filter(operations::run_after.le(now))
                .filter(
                    operations::lease_until
                        .is_null()
                        .or(operations::lease_until.lt(now)),
                )
                .order(operations::created_at)
                .for_update()
                .skip_locked()
                .select(operations::id)
                .first::<Uuid>(conn)
                .optional()?;
            let Some(id) = candidate else {
                return Ok(None);
            };
            diesel::update(operations::table.find(id))
                .set((
                    operations::status.eq(OperationStatus::Running),
                    operations::claimed_by.eq(worker),
                    operations::lease_until.eq(lease_until),
                ))
                .returning(Operation::as_returning())
                .get_result(conn)
                .map(Some)
        })
    }

    /// Extends the lease; false when the claim was lost (another worker took it over).
    pub fn renew(
        conn: &mut PgConnection,
        id: Uuid,
        worker: &str,
        lease_until: DateTime<Utc>,
    ) -> QueryResult<bool> {
        diesel::update(
            operations::table
                .find(id)
                .filter(operations::claimed_by.eq(worker))
                .filter(operations::status.eq(OperationStatus::Running)),
        )
        .set(operations::lease_until.eq(lease_until))
        .execute(conn)
        .map(|n| n == 1)
    }

    /// Hands the operation back to run again at `run_after` (waiting for capacity, or backoff).
    pub fn release(
        conn: &mut PgConnection,
        id: Uuid,
        worker: &str,
        run_after: DateTime<Utc>,
    ) -> QueryResult<usize> {
        diesel::update(
            operations::table
                .find(id)
                .filter(operations::claimed_by.eq(worker)),
        )
        .set((
            operations::claimed_by.eq(None::<String>),
            operations::lease_until.eq(None::<DateTime<Utc>>),
            operations::run_after.eq(run_after),
        ))
        .execute(conn)
    }

    pub fn finish(
        conn: &mut PgConnection,
        id: Uuid,
        status: OperationStatus,
        error: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::update(operations::table.find(id))
            .set((
                operations::status.eq(status),
                operations::error.eq(error),
                operations::claimed_by.eq(None::<String>),
                operations::lease_until.eq(None::<DateTime<Utc>>),
                operations::finished_at.eq(Utc::now()),
            ))
            .execute(conn)
    }
}
