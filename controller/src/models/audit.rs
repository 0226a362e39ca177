//! `audit_log`: one row for every change, written in the same transaction as the change.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::audit_log;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = audit_log, check_for_backend(diesel::pg::Pg))]
pub struct AuditEntry {
    pub id: i64,
    pub actor: String,
    pub action: String,
    pub object_kind: String,
    pub object: String,
    pub detail: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// Records that `actor` did `action` to the `object_kind` named `object`.
pub fn record(
    conn: &mut PgConnection,
    actor: &str,
    action: &str,
    object_kind: &str,
    object: &str,
    detail: serde_json::Value,
) -> QueryResult<()> {
    diesel::insert_into(audit_log::table)
        .values((
            audit_log::actor.eq(actor),
            audit_log::action.eq(action),
            audit_log::object_kind.eq(object_kind),
            audit_log::object.eq(object),
            audit_log::detail.eq(detail),
        ))
        .execute(conn)
        .map(|_| ())
}

impl AuditEntry {
    pub fn recent(conn: &mut PgConnection, limit: i64) -> QueryResult<Vec<AuditEntry>> {
        audit_log::table
            .order(audit_log::id.desc())
            .limit(limit)
            .select(AuditEntry::as_select())
            .load(conn)
    }
}
