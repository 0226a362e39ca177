//! `operations`: durable long actions, claimed by workers under a lease.

use chrono::{DateTime, Utc};
use cohort_proto::api::operations::{OperationKind, OperationStatus};
use diesel::expression::SqlLiteral;
use diesel::prelude::*;
use diesel::sql_types::Timestamptz;
use uuid::Uuid;

use crate::db::schema::operations;

#[derive(Debug, Clone, Queryable, QueryableByName, Selectable, Identifiable)]
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
    /// The fencing token of the claim running it, if any.
    pub claim_token: Option<Uuid>,
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

    /// Claims one runnable operation for `worker` for `lease`, with a new fencing token:
    /// unfinished, due, either unclaimed or with an expired lease, and holding no item of an
    /// instance that an earlier-created unfinished operation still holds (operations on one
    /// instance run in the order they were asked for: a start and a stop sent 10 ms apart never
    /// run in reverse). Access steps (a network policy, SSH keys, a revoked login: see
    /// `crate::jobs::access`) neither wait nor hold others back: each applies what the database
    /// says at the time it runs, so their order does not matter, and a key added while the node
    /// is down waits for the node, not for another operation. Every time is the database's clock, so controllers whose clocks differ
    /// never take each other's leases early. SKIP LOCKED lets workers claim side by side.
    pub fn claim(
        conn: &mut PgConnection,
        worker: &str,
        lease: chrono::Duration,
    ) -> QueryResult<Option<Operation>> {
        diesel::sql_query(
            "WITH candidate AS ( \
               SELECT o.id FROM operations o \
               WHERE o.status IN ('pending', 'running') \
                 AND o.run_after <= now() \
                 AND (o.lease_until IS NULL OR o.lease_until < now()) \
                 AND NOT EXISTS ( \
                   SELECT 1 FROM operation_items mine \
                   JOIN operation_items theirs \
                     ON theirs.instance_id = mine.instance_id \
                    AND theirs.operation_id <> mine.operation_id \
                    AND theirs.status IN ('pending', 'running') \
                   JOIN operations earlier ON earlier.id = theirs.operation_id \
                   WHERE mine.operation_id = o.id \
                     AND mine.status IN ('pending', 'running') \
                     AND mine.instance_id IS NOT NULL \
                     AND mine.action NOT IN ('apply_network_policy', 'apply_ssh_keys', 'revoke_login') \
                     AND theirs.action NOT IN ('apply_network_policy', 'apply_ssh_keys', 'revoke_login') \
                     AND earlier.status IN ('pending', 'running') \
                     AND (earlier.created_at, earlier.id) < (o.created_at, o.id)) \
               ORDER BY o.created_at \
               LIMIT 1 \
               FOR UPDATE OF o SKIP LOCKED) \
             UPDATE operations SET status = 'running', claimed_by = $1, \
               claim_token = gen_random_uuid(), \
               lease_until = now() + $2 * interval '1 millisecond' \
             FROM candidate WHERE operations.id = candidate.id \
             RETURNING operations.*",
        )
        .bind::<diesel::sql_types::Text, _>(worker)
        .bind::<diesel::sql_types::BigInt, _>(lease.num_milliseconds())
        .get_result(conn)
        .optional()
    }

    /// This operation's current claim, when it has one.
    pub fn claim_of(&self) -> Option<Claim> {
        self.claim_token.map(|token| Claim { id: self.id, token })
    }

    /// Whether `claim` still holds its operation; the row is share-locked until the end of the
    /// transaction, so no other worker can claim it while the caller writes under the claim.
    pub fn holds(conn: &mut PgConnection, claim: Claim) -> QueryResult<bool> {
        operations::table
            .find(claim.id)
            .filter(operations::claim_token.eq(claim.token))
            .filter(operations::status.eq(OperationStatus::Running))
            .select(operations::id)
            .for_share()
            .first::<Uuid>(conn)
            .optional()
            .map(|found| found.is_some())
    }

    /// Extends the lease to `lease` from the database's now; false when the claim was lost
    /// (its lease ran out and another claim took the operation over, or it was finished).
    pub fn renew(
        conn: &mut PgConnection,
        claim: Claim,
        lease: chrono::Duration,
    ) -> QueryResult<bool> {
        diesel::update(
            operations::table
                .find(claim.id)
                .filter(operations::claim_token.eq(claim.token))
                .filter(operations::status.eq(OperationStatus::Running)),
        )
        .set(operations::lease_until.eq(db_now_plus(lease).nullable()))
        .execute(conn)
        .map(|n| n == 1)
    }

    /// Hands the operation back to run again `after` from the database's now (waiting for
    /// capacity, or backoff); false when the claim was already lost.
    pub fn release(
        conn: &mut PgConnection,
        claim: Claim,
        after: chrono::Duration,
    ) -> QueryResult<bool> {
        diesel::update(
            operations::table
                .find(claim.id)
                .filter(operations::claim_token.eq(claim.token)),
        )
        .set((
            operations::claimed_by.eq(None::<String>),
            operations::claim_token.eq(None::<Uuid>),
            operations::lease_until.eq(None::<DateTime<Utc>>),
            operations::run_after.eq(db_now_plus(after)),
        ))
        .execute(conn)
        .map(|n| n == 1)
    }

    /// Finishes the operation under `claim`; false (nothing written) when the claim was lost.
    pub fn finish(
        conn: &mut PgConnection,
        claim: Claim,
        status: OperationStatus,
        error: Option<&str>,
    ) -> QueryResult<bool> {
        diesel::update(
            operations::table
                .find(claim.id)
                .filter(operations::claim_token.eq(claim.token)),
        )
        .set((
            operations::status.eq(status),
            operations::error.eq(error),
            operations::claimed_by.eq(None::<String>),
            operations::claim_token.eq(None::<Uuid>),
            operations::lease_until.eq(None::<DateTime<Utc>>),
            operations::finished_at.eq(diesel::dsl::now),
        ))
        .execute(conn)
        .map(|n| n == 1)
    }
}

/// One claim of an operation: its id and the fencing token the claim was given. Writes made for
/// a claim check the token, so a run that lost its lease writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub id: Uuid,
    pub token: Uuid,
}

/// The database's now plus `span`, as a timestamp with time zone (the number is formatted into
/// the SQL: an integer, so nothing from outside reaches the text).
fn db_now_plus(span: chrono::Duration) -> SqlLiteral<Timestamptz> {
    diesel::dsl::sql::<Timestamptz>(&format!(
        "now() + interval '{} milliseconds'",
        span.num_milliseconds()
    ))
}
