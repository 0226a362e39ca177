//! `portal_sessions`: signed-in browsers, kept as the SHA-256 of the cookie's secret, each with
//! its CSRF token and an expiry.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use super::user::User;
use crate::db::schema::{portal_sessions, users};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = portal_sessions, check_for_backend(diesel::pg::Pg))]
pub struct PortalSession {
    pub id: i64,
    pub secret_hash: Vec<u8>,
    pub user_id: i64,
    pub csrf_token: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl PortalSession {
    pub fn insert(
        conn: &mut PgConnection,
        user_id: i64,
        secret_hash: &[u8],
        csrf_token: &str,
        expires_at: DateTime<Utc>,
    ) -> QueryResult<PortalSession> {
        diesel::insert_into(portal_sessions::table)
            .values((
                portal_sessions::user_id.eq(user_id),
                portal_sessions::secret_hash.eq(secret_hash),
                portal_sessions::csrf_token.eq(csrf_token),
                portal_sessions::expires_at.eq(expires_at),
            ))
            .returning(PortalSession::as_returning())
            .get_result(conn)
    }

    /// The live session and its user for a secret's hash: an expired session, or one of a
    /// disabled user, finds nothing.
    pub fn live(
        conn: &mut PgConnection,
        secret_hash: &[u8],
    ) -> QueryResult<Option<(PortalSession, User)>> {
        portal_sessions::table
            .inner_join(users::table)
            .filter(portal_sessions::secret_hash.eq(secret_hash))
            .filter(portal_sessions::expires_at.gt(diesel::dsl::now))
            .filter(users::disabled_at.is_null())
            .select((PortalSession::as_select(), User::as_select()))
            .first(conn)
            .optional()
    }

    /// Ends one session (sign-out).
    pub fn delete(conn: &mut PgConnection, secret_hash: &[u8]) -> QueryResult<usize> {
        diesel::delete(portal_sessions::table.filter(portal_sessions::secret_hash.eq(secret_hash)))
            .execute(conn)
    }

    /// Ends every session of a user but `keep` (after a password change).
    pub fn delete_others(conn: &mut PgConnection, user_id: i64, keep: i64) -> QueryResult<usize> {
        diesel::delete(
            portal_sessions::table
                .filter(portal_sessions::user_id.eq(user_id))
                .filter(portal_sessions::id.ne(keep)),
        )
        .execute(conn)
    }

    /// Forgets expired sessions; called on each sign-in so the table stays small.
    pub fn delete_expired(conn: &mut PgConnection) -> QueryResult<usize> {
        diesel::delete(
            portal_sessions::table.filter(portal_sessions::expires_at.le(diesel::dsl::now)),
        )
        .execute(conn)
    }
}
