//! `api_tokens`: bearer tokens, kept as SHA-256 only.

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
}

impl ApiToken {
    pub fn insert(
        conn: &mut PgConnection,
        user_id: i64,
        name: Option<&str>,
        token_hash: &[u8],
    ) -> QueryResult<ApiToken> {
        diesel::insert_into(api_tokens::table)
            .values((
                api_tokens::user_id.eq(user_id),
                api_tokens::name.eq(name),
                api_tokens::token_hash.eq(token_hash),
            ))
            .returning(ApiToken::as_returning())
            .get_result(conn)
    }

    /// The user a token hash belongs to, if any.
    pub fn user_for_hash(conn: &mut PgConnection, token_hash: &[u8]) -> QueryResult<Option<User>> {
        api_tokens::table
            .inner_join(users::table)
            .filter(api_tokens::token_hash.eq(token_hash))
            .select(User::as_select())
            .first(conn)
            .optional()
    }
}
