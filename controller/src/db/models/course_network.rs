//! `course_networks`: a course's network policy (egress, who may reach SSH); no row = egress
//! open and SSH from anywhere. The egress mode's database text is mapped here and only here.

use cohort_proto::agent::{Egress, NetworkPolicy};
use diesel::prelude::*;

use crate::db::schema::course_networks;

#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable, Insertable)]
#[diesel(table_name = course_networks, check_for_backend(diesel::pg::Pg))]
pub struct CourseNetwork {
    pub course_id: i64,
    pub egress: String,
    pub egress_allow: Vec<String>,
    pub ssh_from: Vec<String>,
}

/// An egress mode the database holds but this controller does not know.
#[derive(Debug, thiserror::Error)]
#[error("course_networks.egress {0:?} is not open, none or allow")]
pub struct UnknownEgress(String);

impl CourseNetwork {
    /// The row that records `policy` for `course_id`.
    pub fn from_policy(course_id: i64, policy: &NetworkPolicy) -> Self {
        let (egress, egress_allow) = match &policy.egress {
            Egress::Open => ("open", Vec::new()),
            Egress::None => ("none", Vec::new()),
            Egress::Allow(list) => ("allow", list.clone()),
        };
        CourseNetwork {
            course_id,
            egress: egress.into(),
            egress_allow,
            ssh_from: policy.ssh_from.clone(),
        }
    }

    pub fn policy(&self) -> Result<NetworkPolicy, UnknownEgress> {
        let egress = match self.egress.as_str() {
            "open" => Egress::Open,
            "none" => Egress::None,
            "allow" => Egress::Allow(self.egress_allow.clone()),
            other => return Err(UnknownEgress(other.into())),
        };
        Ok(NetworkPolicy {
            egress,
            ssh_from: self.ssh_from.clone(),
        })
    }

    /// The course's policy; the default (open, anywhere) where it has no row.
    pub fn of(conn: &mut PgConnection, course_id: i64) -> QueryResult<NetworkPolicy> {
        let row = course_networks::table
            .find(course_id)
            .select(CourseNetwork::as_select())
            .first(conn)
            .optional()?;
        match row {
            None => Ok(NetworkPolicy::default()),
            Some(row) => row
                .policy()
                .map_err(|e| diesel::result::Error::DeserializationError(Box::new(e))),
        }
    }

    /// Writes the policy (the default removes the row).
    pub fn set(conn: &mut PgConnection, course_id: i64, policy: &NetworkPolicy) -> QueryResult<()> {
        if *policy == NetworkPolicy::default() {
            diesel::delete(course_networks::table.find(course_id)).execute(conn)?;
            return Ok(());
        }
        let row = CourseNetwork::from_policy(course_id, policy);
        diesel::insert_into(course_networks::table)
            .values(&row)
            .on_conflict(course_networks::course_id)
            .do_update()
            .set((
                course_networks::egress.eq(&row.egress),
                course_networks::egress_allow.eq(&row.egress_allow),
                course_networks::ssh_from.eq(&row.ssh_from),
                course_networks::updated_at.eq(diesel::dsl::now),
            ))
            .execute(conn)
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_egress_round_trips_through_its_row_and_unknown_text_is_an_error() {
        for egress in [
            Egress::Open,
            Egress::None,
            Egress::Allow(vec!["10.0.0.0/8:3128".into()]),
        ] {
            let policy = NetworkPolicy {
                egress,
                ssh_from: vec!["192.0.2.0/24".into()],
            };
            assert_eq!(
                CourseNetwork::from_policy(1, &policy).policy().unwrap(),
                policy
            );
        }
        let mut row = CourseNetwork::from_policy(1, &NetworkPolicy::default());
        row.egress = "closed".into();
        assert!(row.policy().unwrap_err().to_string().contains("closed"));
    }
}
