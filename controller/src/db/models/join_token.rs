//! `join_tokens`: single-use enrollment secrets, kept as SHA-256 only.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::join_tokens;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = join_tokens, check_for_backend(diesel::pg::Pg))]
pub struct JoinTokenRow {
    pub id: i64,
    pub node_name: String,
    pub secret_hash: Vec<u8>,
    pub created_by: Option<i64>,
    pub expires_at: DateTime<Utc>,
    pub used_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    /// Host names and addresses the admin gave for the node.
    pub addresses: Vec<String>,
}

impl JoinTokenRow {
    pub fn insert(
        conn: &mut PgConnection,
        node_name: &str,
        secret_hash: &[u8],
        created_by: i64,
        expires_at: DateTime<Utc>,
        addresses: &[String],
    ) -> QueryResult<JoinTokenRow> {
        diesel::insert_into(join_tokens::table)
            .values((
                join_tokens::addresses.eq(addresses),
                join_tokens::node_name.eq(node_name),
                join_tokens::secret_hash.eq(secret_hash),
                join_tokens::created_by.eq(created_by),
                join_tokens::expires_at.eq(expires_at),
            ))
            .returning(JoinTokenRow::as_returning())
            .get_result(conn)
    }

    pub fn by_secret_hash(
        conn: &mut PgConnection,
        secret_hash: &[u8],
    ) -> QueryResult<Option<JoinTokenRow>> {
        join_tokens::table
            .filter(join_tokens::secret_hash.eq(secret_hash))
            .select(JoinTokenRow::as_select())
            .first(conn)
            .optional()
    }

    /// The names the node's certificate carries: its name, then the admin's addresses.
    pub fn certificate_names(&self) -> Vec<String> {
        let mut names = vec![self.node_name.clone()];
        for address in &self.addresses {
            if !names.contains(address) {
                names.push(address.clone());
            }
        }
        names
    }

    /// Spends the token if it is unused, unexpired and for `node_name`. The single conditional
    /// UPDATE is what makes a token single-use under any concurrency.
    pub fn spend(
        conn: &mut PgConnection,
        secret_hash: &[u8],
        node_name: &str,
        now: DateTime<Utc>,
    ) -> QueryResult<Option<JoinTokenRow>> {
        diesel::update(
            join_tokens::table
                .filter(join_tokens::secret_hash.eq(secret_hash))
                .filter(join_tokens::node_name.eq(node_name))
                .filter(join_tokens::used_at.is_null())
                .filter(join_tokens::expires_at.gt(now)),
        )
        .set(join_tokens::used_at.eq(now))
        .returning(JoinTokenRow::as_returning())
        .get_result(conn)
        .optional()
    }
}
