//! GPU time read (issue 43): `GET /api/v1/usage` and the portal's figures, from the hourly rows
//! the poller writes (`app::gpu_time`). Who may see what: a student their own instances, an
//! instructor their courses' (and their own), an admin everything; a filter reaching past that
//! is a 403, not an empty answer, so a typo is not mistaken for "no use".

use chrono::{DateTime, Duration, NaiveDate, Utc};
use cohort_proto::api::usage::{UsageQuery, UsageReport, UsageRow};
use cohort_proto::api::users::Role;

use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::db::models::course::Course;
use crate::db::queries::gpu_usage::{self, Filter, GroupBy};
use crate::error::{ActionError, ActionResult};

/// `by`'s value, named in an error otherwise.
pub fn group_by(by: Option<&str>) -> ActionResult<GroupBy> {
    match by.unwrap_or("student") {
        "student" => Ok(GroupBy::Student),
        "course" => Ok(GroupBy::Course),
        "node" => Ok(GroupBy::Node),
        "day" => Ok(GroupBy::Day),
        other => Err(ActionError::invalid(
            "by",
            format!("must be student, course, node or day, not {other:?}"),
        )),
    }
}

/// A day (`YYYY-MM-DD`, UTC midnight; with `end_of_day` the next midnight) or an RFC 3339 time.
pub fn parse_time(field: &str, value: &str, end_of_day: bool) -> ActionResult<DateTime<Utc>> {
    if let Ok(day) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        let start = day.and_hms_opt(0, 0, 0).map(|t| t.and_utc());
        let at = start.map(|t| if end_of_day { t + Duration::days(1) } else { t });
        if let Some(at) = at {
            return Ok(at);
        }
    }
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| {
            ActionError::invalid(
                field,
                format!("must be a day (YYYY-MM-DD) or an RFC 3339 time, not {value:?}"),
            )
        })
}

/// The report `q` asks for, as `caller` may see it.
pub async fn report(ctl: &Controller, caller: Caller, q: UsageQuery) -> ActionResult<UsageReport> {
    let by = group_by(q.by.as_deref())?;
    let since = q
        .since
        .as_deref()
        .map(|s| parse_time("since", s, false))
        .transpose()?;
    let until = q
        .until
        .as_deref()
        .map(|s| parse_time("until", s, true))
        .transpose()?;
    if let (Some(since), Some(until)) = (since, until) {
        if until <= since {
            return Err(ActionError::invalid("until", "must be after since"));
        }
    }
    for (field, value) in [("course", &q.course), ("user", &q.user)] {
        if value
            .as_deref()
            .is_some_and(|v| v.is_empty() || v.len() > 64)
        {
            return Err(ActionError::invalid(field, "must be 1 to 64 characters"));
        }
    }
    let sums = ctl
        .db(move |conn| {
            let scope = match caller.role {
                Role::Admin => None,
                Role::Instructor => {
                    let taught = Course::taught_by(conn, caller.user.id)?;
                    if let Some(code) = &q.course {
                        if !taught.iter().any(|(_, c)| c == code) {
                            return Err(ActionError::Forbidden(format!(
                                "course {code} is not one of yours"
                            )));
                        }
                    }
                    Some((
                        caller.user.id,
                        taught.into_iter().map(|(id, _)| id).collect(),
                    ))
                }
                Role::Student => {
                    if q.user.as_deref().is_some_and(|u| u != caller.name()) {
                        return Err(ActionError::Forbidden(
                            "a student sees only their own GPU time".into(),
                        ));
                    }
                    Some((caller.user.id, Vec::new()))
                }
            };
            let filter = Filter {
                course: q.course,
                user: q.user,
                since,
                until,
                scope,
            };
            Ok(gpu_usage::report(conn, &filter, by)?)
        })
        .await?;
    Ok(UsageReport {
        by: match by {
            GroupBy::Student => "student",
            GroupBy::Course => "course",
            GroupBy::Node => "node",
            GroupBy::Day => "day",
        }
        .into(),
        rows: sums
            .into_iter()
            .map(|s| UsageRow {
                key: s.key,
                allocated_seconds: s.allocated_s,
                busy_seconds: s.busy_s,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_and_times_parse_and_bad_ones_name_their_field() {
        let d = parse_time("since", "2026-11-27", false).unwrap();
        assert_eq!(d.to_rfc3339(), "2026-11-27T00:00:00+00:00");
        let e = parse_time("until", "2026-11-27", true).unwrap();
        assert_eq!(e.to_rfc3339(), "2026-11-28T00:00:00+00:00");
        assert!(parse_time("since", "2026-11-27T10:00:00Z", false).is_ok());
        let bad = parse_time("until", "yesterday", true).unwrap_err();
        assert!(matches!(bad, ActionError::Invalid { ref field, .. } if field == "until"));
        let bad = group_by(Some("week")).unwrap_err();
        assert!(matches!(bad, ActionError::Invalid { ref field, .. } if field == "by"));
    }
}
