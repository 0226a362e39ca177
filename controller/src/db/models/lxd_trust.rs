//! `lxd_trust_tokens` and `lxd_certificates`: the LXD-style API's trust store. A token (kept as
//! SHA-256 only) admits one client certificate, which is then pinned by fingerprint to a user.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use super::user::User;
use crate::db::schema::{lxd_certificates, lxd_trust_tokens, users};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = lxd_trust_tokens, check_for_backend(diesel::pg::Pg))]
pub struct LxdTrustToken {
    pub id: i64,
    pub name: String,
    pub user_id: i64,
    pub secret_hash: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

impl LxdTrustToken {
    pub fn insert(
        conn: &mut PgConnection,
        name: &str,
        user_id: i64,
        secret_hash: &[u8],
        expires_at: DateTime<Utc>,
    ) -> QueryResult<LxdTrustToken> {
        diesel::insert_into(lxd_trust_tokens::table)
            .values((
                lxd_trust_tokens::name.eq(name),
                lxd_trust_tokens::user_id.eq(user_id),
                lxd_trust_tokens::secret_hash.eq(secret_hash),
                lxd_trust_tokens::expires_at.eq(expires_at),
            ))
            .returning(LxdTrustToken::as_returning())
            .get_result(conn)
    }

    /// Takes (deletes and returns) the live token with this secret hash: a token admits one
    /// certificate, and an expired one admits none.
    pub fn redeem(conn: &mut PgConnection, secret_hash: &[u8]) -> QueryResult<Option<Self>> {
        diesel::delete(
            lxd_trust_tokens::table
                .filter(lxd_trust_tokens::secret_hash.eq(secret_hash))
                .filter(lxd_trust_tokens::expires_at.gt(diesel::dsl::now)),
        )
        .returning(LxdTrustToken::as_returning())
        .get_result(conn)
        .optional()
    }

    /// Pending tokens, oldest first; `user_id` limits them to one user's.
    pub fn pending(conn: &mut PgConnection, user_id: Option<i64>) -> QueryResult<Vec<Self>> {
        let mut query = lxd_trust_tokens::table
            .filter(lxd_trust_tokens::expires_at.gt(diesel::dsl::now))
            .into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(lxd_trust_tokens::user_id.eq(user_id));
        }
        query
            .order(lxd_trust_tokens::id)
            .select(LxdTrustToken::as_select())
            .load(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<bool> {
        diesel::delete(lxd_trust_tokens::table.find(id))
            .execute(conn)
            .map(|n| n == 1)
    }
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = lxd_certificates, check_for_backend(diesel::pg::Pg))]
pub struct LxdCertificate {
    pub id: i64,
    pub name: String,
    pub user_id: i64,
    pub fingerprint: String,
    pub certificate: String,
    pub created_at: DateTime<Utc>,
    /// Trusted until then; after it the client is untrusted, as LXD answers an unknown one.
    pub expires_at: DateTime<Utc>,
}

impl LxdCertificate {
    pub fn insert(
        conn: &mut PgConnection,
        name: &str,
        user_id: i64,
        fingerprint: &str,
        certificate: &str,
        expires_at: DateTime<Utc>,
    ) -> QueryResult<LxdCertificate> {
        diesel::insert_into(lxd_certificates::table)
            .values((
                lxd_certificates::name.eq(name),
                lxd_certificates::user_id.eq(user_id),
                lxd_certificates::fingerprint.eq(fingerprint),
                lxd_certificates::certificate.eq(certificate),
                lxd_certificates::expires_at.eq(expires_at),
            ))
            .returning(LxdCertificate::as_returning())
            .get_result(conn)
    }

    /// The user a trusted certificate is bound to; an expired certificate, or a disabled user's,
    /// finds no one.
    pub fn user_for(conn: &mut PgConnection, fingerprint: &str) -> QueryResult<Option<User>> {
        lxd_certificates::table
            .inner_join(users::table)
            .filter(lxd_certificates::fingerprint.eq(fingerprint))
            .filter(lxd_certificates::expires_at.gt(diesel::dsl::now))
            .filter(users::disabled_at.is_null())
            .select(User::as_select())
            .first(conn)
            .optional()
    }

    /// Trusted certificates with their users' names, oldest first; `user_id` limits them to one
    /// user's.
    pub fn list(
        conn: &mut PgConnection,
        user_id: Option<i64>,
    ) -> QueryResult<Vec<(LxdCertificate, String)>> {
        let mut query = lxd_certificates::table
            .inner_join(users::table)
            .into_boxed();
        if let Some(user_id) = user_id {
            query = query.filter(lxd_certificates::user_id.eq(user_id));
        }
        query
            .order(lxd_certificates::id)
            .select((LxdCertificate::as_select(), users::username))
            .load(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<bool> {
        diesel::delete(lxd_certificates::table.find(id))
            .execute(conn)
            .map(|n| n == 1)
    }
}
