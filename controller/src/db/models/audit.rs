//! `audit_log`: one row for every change, written in the same transaction as the change.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::enums::{AuditAction, AuditObject};
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
/// Who an audit row written for an operation names: the user who started it, or `system`.
pub fn actor(conn: &mut PgConnection, user_id: Option<i64>) -> QueryResult<String> {
    match user_id {
        Some(id) => Ok(super::user::User::find(conn, id)?.username),
        None => Ok("system".into()),
    }
}

pub fn record(
    conn: &mut PgConnection,
    actor: &str,
    action: AuditAction,
    object_kind: AuditObject,
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

/// Filters of a page of the audit log; `scope` limits it to these (kind, object) pairs.
#[derive(Debug, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub object_kind: Option<String>,
    pub object: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub before: Option<i64>,
    pub scope: Option<Scope>,
}

/// The objects an instructor may see: their courses and those courses' instances.
#[derive(Debug, Default)]
pub struct Scope {
    pub courses: Vec<String>,
    pub instances: Vec<String>,
}

impl AuditEntry {
    /// Up to `limit` entries matching `f`, newest first.
    pub fn page(
        conn: &mut PgConnection,
        f: &AuditFilter,
        limit: i64,
    ) -> QueryResult<Vec<AuditEntry>> {
        let mut q = audit_log::table.into_boxed();
        if let Some(v) = &f.actor {
            q = q.filter(audit_log::actor.eq(v));
        }
        if let Some(v) = &f.action {
            q = q.filter(audit_log::action.eq(v));
        }
        if let Some(v) = &f.object_kind {
            q = q.filter(audit_log::object_kind.eq(v));
        }
        if let Some(v) = &f.object {
            q = q.filter(audit_log::object.eq(v));
        }
        if let Some(v) = f.since {
            q = q.filter(audit_log::created_at.ge(v));
        }
        if let Some(v) = f.before {
            q = q.filter(audit_log::id.lt(v));
        }
        if let Some(scope) = &f.scope {
            q = q.filter(
                audit_log::object_kind
                    .eq(AuditObject::Course)
                    .and(audit_log::object.eq_any(&scope.courses))
                    .or(audit_log::object_kind
                        .eq(AuditObject::Instance)
                        .and(audit_log::object.eq_any(&scope.instances)))
                    // Instances since deleted: the entry names their course.
                    .or(audit_log::object_kind.eq(AuditObject::Instance).and(
                        audit_log::detail
                            .retrieve_as_text("course")
                            .eq_any(&scope.courses),
                    )),
            );
        }
        q.order(audit_log::id.desc())
            .limit(limit)
            .select(AuditEntry::as_select())
            .load(conn)
    }

    pub fn recent(conn: &mut PgConnection, limit: i64) -> QueryResult<Vec<AuditEntry>> {
        audit_log::table
            .order(audit_log::id.desc())
            .limit(limit)
            .select(AuditEntry::as_select())
            .load(conn)
    }
}
