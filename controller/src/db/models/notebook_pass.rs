//! `notebook_passes`: what lets a browser into one container's JupyterLab on the notebook's own
//! origin. A one-use ticket (in the portal's redirect, a minute long) is traded once for a pass
//! (in that origin's cookie); both keep only the SHA-256 of their secret and belong to one
//! container and one portal session, whose end (sign-out, a password change, a disabled account)
//! ends them.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use super::user::User;
use crate::db::schema::{instances, notebook_passes, portal_sessions, users};

/// A pass or ticket, as the database keeps it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = notebook_passes, check_for_backend(diesel::pg::Pg))]
pub struct NotebookPass {
    pub secret_hash: Vec<u8>,
    pub ticket: bool,
    pub session_id: i64,
    pub instance_id: i64,
    pub expires_at: DateTime<Utc>,
}

impl NotebookPass {
    /// Keeps a new ticket (`ticket`) or pass for `instance_id`, of portal session `session_id`.
    pub fn insert(
        conn: &mut PgConnection,
        secret_hash: &[u8],
        ticket: bool,
        session_id: i64,
        instance_id: i64,
        expires_at: DateTime<Utc>,
    ) -> QueryResult<usize> {
        diesel::insert_into(notebook_passes::table)
            .values((
                notebook_passes::secret_hash.eq(secret_hash),
                notebook_passes::ticket.eq(ticket),
                notebook_passes::session_id.eq(session_id),
                notebook_passes::instance_id.eq(instance_id),
                notebook_passes::expires_at.eq(expires_at),
            ))
            .execute(conn)
    }

    /// Takes a ticket for the container named `instance`: gone from the table whatever follows,
    /// so it is good once; `None` when there is no such ticket, it is for another container,
    /// or it has expired.
    pub fn take_ticket(
        conn: &mut PgConnection,
        secret_hash: &[u8],
        instance: &str,
    ) -> QueryResult<Option<NotebookPass>> {
        let taken: Option<NotebookPass> = diesel::delete(
            notebook_passes::table
                .filter(notebook_passes::secret_hash.eq(secret_hash))
                .filter(notebook_passes::ticket.eq(true)),
        )
        .returning(NotebookPass::as_returning())
        .get_result(conn)
        .optional()?;
        let Some(taken) = taken else {
            return Ok(None);
        };
        let name: Option<String> = instances::table
            .find(taken.instance_id)
            .select(instances::name)
            .first(conn)
            .optional()?;
        Ok((taken.expires_at > Utc::now() && name.as_deref() == Some(instance)).then_some(taken))
    }

    /// The user holding a live pass (not a ticket) for the container named `instance`: its
    /// portal session still live, its user not disabled.
    pub fn holder(
        conn: &mut PgConnection,
        secret_hash: &[u8],
        instance: &str,
    ) -> QueryResult<Option<User>> {
        notebook_passes::table
            .inner_join(portal_sessions::table.inner_join(users::table))
            .inner_join(instances::table)
            .filter(notebook_passes::secret_hash.eq(secret_hash))
            .filter(notebook_passes::ticket.eq(false))
            .filter(notebook_passes::expires_at.gt(diesel::dsl::now))
            .filter(portal_sessions::expires_at.gt(diesel::dsl::now))
            .filter(users::disabled_at.is_null())
            .filter(instances::name.eq(instance))
            .select(User::as_select())
            .first(conn)
            .optional()
    }

    /// Forgets expired tickets and passes; called as tickets are made so the table stays small.
    pub fn delete_expired(conn: &mut PgConnection) -> QueryResult<usize> {
        diesel::delete(
            notebook_passes::table.filter(notebook_passes::expires_at.le(diesel::dsl::now)),
        )
        .execute(conn)
    }
}
