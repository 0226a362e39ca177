//! `api_tokens`: bearer tokens, kept as SHA-256 only, each with an expiry.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use super::user::User;
use crate::db::schema::{api_tokens, users};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = api_tokens, check_for_backend(diesel::pg::Pg))]
pub struct ApiToken {
    pub id: i64,
    pub user_id: i64,
    pub name: Option<String>,
    pub token_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub expires_at: DateTime<Utc>,
}

impl ApiToken {
    pub fn insert(
        conn: &mut PgConnection,
        user_id: i64,
        name: Option<&str>,
        token_hash: &[u8],
        expires_at: DateTime<Utc>,
    ) -> QueryResult<ApiToken> {
        diesel::insert_into(api_tokens::table)
            .values((
                api_tokens::user_id.eq(user_id),
                api_tokens::name.eq(name),
                api_tokens::token_hash.eq(token_hash),
                api_tokens::expires_at.eq(expires_at),
            ))
            .returning(ApiToken::as_returning())
            .get_result(conn)
    }

    /// The user a live token hash belongs to: an expired token, or one of a disabled user, finds
    /// no one.
    pub fn user_for_hash(conn: &mut PgConnection, token_hash: &[u8]) -> QueryResult<Option<User>> {
        api_tokens::table
            .inner_join(users::table)
            .filter(api_tokens::token_hash.eq(token_hash))
            .filter(api_tokens::expires_at.gt(diesel::dsl::now))
            .filter(users::disabled_at.is_null())
            .select(User::as_select())
            .first(conn)
            .optional()
    }

    /// A user's tokens, oldest first.
    pub fn for_user(conn: &mut PgConnection, user_id: i64) -> QueryResult<Vec<ApiToken>> {
        api_tokens::table
            .filter(api_tokens::user_id.eq(user_id))
            .order(api_tokens::id)
            .select(ApiToken::as_select())
            .load(conn)
    }

    /// Revokes (deletes) one token of a user; false when the user has no such token.
    pub fn revoke(conn: &mut PgConnection, user_id: i64, id: i64) -> QueryResult<bool> {
        diesel::delete(
            api_tokens::table
                .filter(api_tokens::user_id.eq(user_id))
                .filter(api_tokens::id.eq(id)),
        )
        .execute(conn)
        .map(|n| n == 1)
    }
}
