//! `ssh_keys`: a user's public keys, installed in their containers.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::ssh_keys;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = ssh_keys, check_for_backend(diesel::pg::Pg))]
pub struct SshKey {
    pub id: i64,
    pub user_id: i64,
    pub public_key: String,
    pub fingerprint: String,
    pub created_at: DateTime<Utc>,
}

impl SshKey {
    pub fn insert(
        conn: &mut PgConnection,
        user_id: i64,
        public_key: &str,
        fingerprint: &str,
    ) -> QueryResult<SshKey> {
        diesel::insert_into(ssh_keys::table)
            .values((
                ssh_keys::user_id.eq(user_id),
                ssh_keys::public_key.eq(public_key),
                ssh_keys::fingerprint.eq(fingerprint),
            ))
            .returning(SshKey::as_returning())
            .get_result(conn)
    }

    pub fn for_user(conn: &mut PgConnection, user_id: i64) -> QueryResult<Vec<SshKey>> {
        ssh_keys::table
            .filter(ssh_keys::user_id.eq(user_id))
            .order(ssh_keys::id)
            .select(SshKey::as_select())
            .load(conn)
    }

    /// Deletes one of the user's keys; returns how many rows went (0 or 1).
    pub fn delete(conn: &mut PgConnection, user_id: i64, id: i64) -> QueryResult<usize> {
        diesel::delete(
            ssh_keys::table
                .filter(ssh_keys::id.eq(id))
                .filter(ssh_keys::user_id.eq(user_id)),
        )
        .execute(conn)
    }
}
