//! `cohort usage`: `GET /usage` as a table, CSV or JSON. Hours are shown with two decimals; the
//! JSON keeps the controller's seconds.

use cohort_proto::api::usage::UsageReport;

use super::Session;
use crate::args::usage::Usage;
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: Usage) -> anyhow::Result<()> {
    let client = session.remote_only(args.remote.as_deref())?;
    let mut query: Vec<(&str, String)> = vec![("by", args.by.clone())];
    let filters = [
        ("course", &args.course),
        ("user", &args.user),
        ("since", &args.since),
        ("until", &args.until),
    ];
    for (key, value) in filters {
        if let Some(v) = value {
            query.push((key, v.clone()));
        }
    }
    let request = client.request(reqwest::Method::GET, "/usage").query(&query);
    let report: UsageReport = client.json(request).await?;
    let key = match report.by.as_str() {
        "course" => "COURSE",
        "node" => "NODE",
        "day" => "DAY",
        _ => "STUDENT",
    };
    let mut rows = Rows::new([key, "ALLOCATED GPU-HOURS", "BUSY GPU-HOURS", "BUSY %"]);
    for r in &report.rows {
        let share = if r.allocated_seconds > 0.0 {
            format!("{:.0}", 100.0 * r.busy_seconds / r.allocated_seconds)
        } else {
            "-".into()
        };
        rows.push([
            r.key.clone(),
            format!("{:.2}", r.allocated_seconds / 3600.0),
            format!("{:.2}", r.busy_seconds / 3600.0),
            share,
        ]);
    }
    render::print(args.format, &rows, &report.rows)
}
