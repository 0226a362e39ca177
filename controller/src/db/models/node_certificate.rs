//! `node_certificates`: the agent certificates the CA issued, pinned by fingerprint.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::node_certificates;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = node_certificates, check_for_backend(diesel::pg::Pg))]
pub struct NodeCertificate {
    pub id: i64,
    pub node_name: String,
    pub fingerprint: String,
    pub certificate_pem: String,
    pub not_after: DateTime<Utc>,
    pub issued_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

impl NodeCertificate {
    pub fn insert(
        conn: &mut PgConnection,
        node_name: &str,
        fingerprint: &str,
        certificate_pem: &str,
        not_after: DateTime<Utc>,
    ) -> QueryResult<NodeCertificate> {
        diesel::insert_into(node_certificates::table)
            .values((
                node_certificates::node_name.eq(node_name),
                node_certificates::fingerprint.eq(fingerprint),
                node_certificates::certificate_pem.eq(certificate_pem),
                node_certificates::not_after.eq(not_after),
            ))
            .returning(NodeCertificate::as_returning())
            .get_result(conn)
    }

    /// The node's newest certificate that is not revoked: the one pin the controller accepts.
    pub fn current(
        conn: &mut PgConnection,
        node_name: &str,
    ) -> QueryResult<Option<NodeCertificate>> {
        node_certificates::table
            .filter(node_certificates::node_name.eq(node_name))
            .filter(node_certificates::revoked_at.is_null())
            .order(node_certificates::id.desc())
            .select(NodeCertificate::as_select())
            .first(conn)
            .optional()
    }

    /// The node's certificates that are neither revoked nor expired, oldest first: the pins the
    /// controller accepts from its agent (more than one only while a renewal is unconfirmed).
    pub fn live(conn: &mut PgConnection, node_name: &str) -> QueryResult<Vec<NodeCertificate>> {
        node_certificates::table
            .filter(node_certificates::node_name.eq(node_name))
            .filter(node_certificates::revoked_at.is_null())
            .filter(node_certificates::not_after.gt(diesel::dsl::now))
            .order(node_certificates::id.asc())
            .select(NodeCertificate::as_select())
            .load(conn)
    }

    /// Every enrolled node's newest live certificate expiry (nodes with none are left out).
    pub fn expiries(conn: &mut PgConnection) -> QueryResult<Vec<(String, DateTime<Utc>)>> {
        let rows: Vec<(String, Option<DateTime<Utc>>)> = node_certificates::table
            .filter(node_certificates::revoked_at.is_null())
            .filter(node_certificates::not_after.gt(diesel::dsl::now))
            .group_by(node_certificates::node_name)
            .select((
                node_certificates::node_name,
                diesel::dsl::max(node_certificates::not_after),
            ))
            .load(conn)?;
        Ok(rows
            .into_iter()
            .filter_map(|(node, at)| Some((node, at?)))
            .collect())
    }

    /// Revokes the node's live certificates other than `keep` (a renewal confirmed).
    pub fn revoke_others(
        conn: &mut PgConnection,
        node_name: &str,
        keep: &str,
    ) -> QueryResult<usize> {
        diesel::update(
            node_certificates::table
                .filter(node_certificates::node_name.eq(node_name))
                .filter(node_certificates::fingerprint.ne(keep))
                .filter(node_certificates::revoked_at.is_null()),
        )
        .set(node_certificates::revoked_at.eq(diesel::dsl::now))
        .execute(conn)
    }

    /// A live certificate by fingerprint (for agents calling the controller with it).
    pub fn live_by_fingerprint(
        conn: &mut PgConnection,
        fingerprint: &str,
    ) -> QueryResult<Option<NodeCertificate>> {
        node_certificates::table
            .filter(node_certificates::fingerprint.eq(fingerprint))
            .filter(node_certificates::revoked_at.is_null())
            .filter(node_certificates::not_after.gt(diesel::dsl::now))
            .select(NodeCertificate::as_select())
            .first(conn)
            .optional()
    }

    /// Revokes every certificate of the node (enrolling again, or removal).
    pub fn revoke_all(conn: &mut PgConnection, node_name: &str) -> QueryResult<usize> {
        diesel::update(
            node_certificates::table
                .filter(node_certificates::node_name.eq(node_name))
                .filter(node_certificates::revoked_at.is_null()),
        )
        .set(node_certificates::revoked_at.eq(diesel::dsl::now))
        .execute(conn)
    }
}
