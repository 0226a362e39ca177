//! The audit log, read: admins see every entry, instructors the entries about their courses and
//! those courses' instances, students none.

use cohort_proto::api::audit::{AuditEntry as WireEntry, AuditPage, AuditQuery};
use cohort_proto::api::users::Role;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::models::audit::{AuditEntry, AuditFilter, Scope};
use crate::db::models::course::Course;
use crate::db::models::instance::Instance;
use crate::error::{ActionError, ActionResult};

const DEFAULT_LIMIT: u32 = 100;
const MAX_LIMIT: u32 = 1000;

pub async fn list(ctl: &Controller, caller: Caller, q: AuditQuery) -> ActionResult<AuditPage> {
    caller.require(Role::Instructor)?;
    let limit = q.limit.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > MAX_LIMIT {
        return Err(ActionError::invalid(
            "limit",
            format!("must be 1 to {MAX_LIMIT}"),
        ));
    }
    if q.before.is_some_and(|b| b < 1) {
        return Err(ActionError::invalid(
            "before",
            "must be a positive entry id",
        ));
    }
    ctl.db(move |conn| {
        let scope = if caller.is_admin() {
            None
        } else {
            let taught = Course::taught_by(conn, caller.user.id)?;
            let ids: Vec<i64> = taught.iter().map(|(id, _)| *id).collect();
            let names = Instance::names_in_courses(conn, &ids)?;
            Some(Scope {
                courses: taught.into_iter().map(|(_, code)| code).collect(),
                instances: names,
            })
        };
        let filter = AuditFilter {
            actor: q.actor,
            action: q.action,
            object_kind: q.object_kind,
            object: q.object,
            since: q.since,
            before: q.before,
            scope,
        };
        // One more than asked says whether there is a next page.
        let mut rows = AuditEntry::page(conn, &filter, i64::from(limit) + 1)?;
        let more = rows.len() > limit as usize;
        rows.truncate(limit as usize);
        Ok(AuditPage {
            next_before: if more {
                rows.last().map(|r| r.id)
            } else {
                None
            },
            entries: rows
                .into_iter()
                .map(|r| WireEntry {
                    id: r.id,
                    actor: r.actor,
                    action: r.action,
                    object_kind: r.object_kind,
                    object: r.object,
                    detail: r.detail,
                    created_at: r.created_at,
                })
                .collect(),
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use crate::db::enums::{AuditAction, AuditObject};
    use crate::http::portal::words::check_audit_words;

    /// The portal shows the log in three languages: every action and object kind it can hold
    /// has its words there.
    #[test]
    fn every_audit_action_and_object_has_the_portals_words() {
        for a in AuditAction::ALL {
            check_audit_words(Some(a.as_str()), None);
        }
        for o in AuditObject::ALL {
            check_audit_words(None, Some(o.as_str()));
        }
    }
}
