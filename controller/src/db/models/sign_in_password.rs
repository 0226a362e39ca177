//! `sign_in_passwords`: a user's portal password as an argon2id PHC string.

use diesel::prelude::*;

use crate::db::schema::sign_in_passwords;

pub struct SignInPassword;

impl SignInPassword {
    pub fn hash_of(conn: &mut PgConnection, user_id: i64) -> QueryResult<Option<String>> {
        sign_in_passwords::table
            .find(user_id)
            .select(sign_in_passwords::hash)
            .first(conn)
            .optional()
    }

    /// Sets (or replaces) the user's password hash.
    pub fn set(conn: &mut PgConnection, user_id: i64, hash: &str) -> QueryResult<usize> {
        diesel::insert_into(sign_in_passwords::table)
            .values((
                sign_in_passwords::user_id.eq(user_id),
                sign_in_passwords::hash.eq(hash),
            ))
            .on_conflict(sign_in_passwords::user_id)
            .do_update()
            .set((
                sign_in_passwords::hash.eq(hash),
                sign_in_passwords::changed_at.eq(diesel::dsl::now),
            ))
            .execute(conn)
    }
}
