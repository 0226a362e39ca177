//! A course's GPU budget from the CLI: `--gpu-hours-per-student` and `--budget-period` of
//! `cohort course create|set`, and `cohort course grant CODE USER HOURS`. The controller checks
//! the numbers (a 400 naming the field); here they are only read as numbers.

use anyhow::{bail, Context};
use cohort_proto::api::courses::{
    Course as CourseInfo, CourseBudget, GpuHours, GrantHours, StudentBudget,
};

use super::Session;
use crate::args::course::{BudgetFlags, CourseGrant};
use crate::client::{seg, Client};
use crate::render;

/// `--gpu-hours-per-student H` as hours.
pub fn hours_flag(flag: Option<&str>) -> anyhow::Result<Option<GpuHours>> {
    flag.map(|h| parse_hours("--gpu-hours-per-student", h))
        .transpose()
}

fn parse_hours(what: &str, h: &str) -> anyhow::Result<GpuHours> {
    let n: f64 = h
        .trim()
        .parse()
        .with_context(|| format!("{what} takes a number of hours, not {h:?}"))?;
    Ok(GpuHours(n))
}

/// What `course set` asks of the budget: `None` when neither flag was given.
pub fn set_request(flags: &BudgetFlags) -> anyhow::Result<Option<BudgetChange>> {
    if flags.gpu_hours_per_student.is_none() && flags.budget_period.is_none() {
        return Ok(None);
    }
    let hours = match flags.gpu_hours_per_student.as_deref().map(str::trim) {
        None => None,
        Some("none") => Some(None),
        Some(h) => Some(Some(parse_hours("--gpu-hours-per-student", h)?)),
    };
    Ok(Some(BudgetChange {
        hours,
        period: flags.budget_period.clone(),
    }))
}

/// A change of budget: each part `None` keeps the course's.
pub struct BudgetChange {
    /// `Some(None)`: remove the budget.
    hours: Option<Option<GpuHours>>,
    period: Option<String>,
}

/// `PUT {path}/budget` with the flags given over the course's budget now.
pub async fn set(client: &Client, path: &str, change: BudgetChange) -> anyhow::Result<()> {
    let course: CourseInfo = client.get(path).await?;
    let body = CourseBudget {
        gpu_hours_per_student: change.hours.unwrap_or(course.gpu_hours_per_student),
        budget_period: change.period.or(course.budget_period),
    };
    let _: CourseInfo = client.put(&format!("{path}/budget"), &body).await?;
    Ok(())
}

/// `cohort course grant CODE USER HOURS`: prints the student's budget this period.
pub async fn grant(session: &Session, args: CourseGrant) -> anyhow::Result<()> {
    let (client, code) = session.target(&args.code)?;
    if args.user.trim().is_empty() {
        bail!("give the student's username");
    }
    let body = GrantHours {
        username: args.user,
        hours: parse_hours("HOURS", &args.hours)?,
    };
    let budget: StudentBudget = client
        .post(&format!("/courses/{}/grants", seg(&code)), &body)
        .await?;
    print!("{}", render::yaml(&budget)?);
    Ok(())
}
