//! The portal's GPU time page (`/usage`, issue 43), through the same action as
//! `GET /api/v1/usage` and so under the same roles: a student sees their own hours this month
//! by course; an instructor the class (a table sortable by hours, links not script) and a per-day
//! chart drawn here as SVG; an admin also courses and nodes, with CSV downloads
//! (`/usage.csv?by=...`) for the department's report. Its few labels are kept here in the three
//! languages, so the page adds nothing to the shared catalogue.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use chrono::{Datelike, Duration, Utc};
use cohort_proto::api::usage::{UsageQuery, UsageRow};
use cohort_proto::api::users::Role;
use maud::{html, Markup};
use serde::Deserialize;

use super::error::PortalError;
use super::i18n::Lang;
use super::layout;
use super::session::SignedIn;
use crate::app::state::Controller;

/// The page's labels.
#[derive(Clone, Copy)]
enum Label {
    Title,
    ThisMonth,
    PerDay,
    Student,
    Course,
    Node,
    Allocated,
    Busy,
    SortByHours,
    SortByName,
    Download,
    Nothing,
}

fn t(lang: Lang, label: Label) -> &'static str {
    use Label::*;
    match (lang, label) {
        (Lang::En, Title) => "GPU time",
        (Lang::ZhHant, Title) => "GPU 時間",
        (Lang::ZhHans, Title) => "GPU 时间",
        (Lang::En, ThisMonth) => "This month",
        (Lang::ZhHant, ThisMonth) => "本月",
        (Lang::ZhHans, ThisMonth) => "本月",
        (Lang::En, PerDay) => "GPU-hours per day (last 30 days; light: allocated, dark: busy)",
        (Lang::ZhHant, PerDay) => "每日 GPU 小時（最近 30 天；淺色：已分配，深色：忙碌）",
        (Lang::ZhHans, PerDay) => "每日 GPU 小时（最近 30 天；浅色：已分配，深色：忙碌）",
        (Lang::En, Student) => "Student",
        (Lang::ZhHant, Student) => "學生",
        (Lang::ZhHans, Student) => "学生",
        (Lang::En, Course) => "Course",
        (Lang::ZhHant, Course) => "課程",
        (Lang::ZhHans, Course) => "课程",
        (Lang::En, Node) => "Node",
        (Lang::ZhHant, Node) => "節點",
        (Lang::ZhHans, Node) => "节点",
        (Lang::En, Allocated) => "Allocated GPU-hours",
        (Lang::ZhHant, Allocated) => "已分配 GPU 小時",
        (Lang::ZhHans, Allocated) => "已分配 GPU 小时",
        (Lang::En, Busy) => "Busy GPU-hours",
        (Lang::ZhHant, Busy) => "忙碌 GPU 小時",
        (Lang::ZhHans, Busy) => "忙碌 GPU 小时",
        (Lang::En, SortByHours) => "sort by hours",
        (Lang::ZhHant, SortByHours) => "按小時排序",
        (Lang::ZhHans, SortByHours) => "按小时排序",
        (Lang::En, SortByName) => "sort by name",
        (Lang::ZhHant, SortByName) => "按名稱排序",
        (Lang::ZhHans, SortByName) => "按名称排序",
        (Lang::En, Download) => "Download CSV",
        (Lang::ZhHant, Download) => "下載 CSV",
        (Lang::ZhHans, Download) => "下载 CSV",
        (Lang::En, Nothing) => "No GPU time yet.",
        (Lang::ZhHant, Nothing) => "尚無 GPU 時間。",
        (Lang::ZhHans, Nothing) => "尚无 GPU 时间。",
    }
}

#[derive(Deserialize, Default)]
pub struct PageQuery {
    /// Only this course (an instructor's or admin's choice).
    course: Option<String>,
    /// `hours` (default, most first) or `name`.
    sort: Option<String>,
}

/// The first instant of this month (UTC), as the API takes it.
fn month_start() -> String {
    let now = Utc::now();
    format!("{:04}-{:02}-01", now.year(), now.month())
}

async fn report(
    ctl: &Controller,
    s: &SignedIn,
    q: UsageQuery,
) -> Result<Vec<UsageRow>, PortalError> {
    crate::usage::report(ctl, s.caller.clone(), q)
        .await
        .map(|r| r.rows)
        .map_err(|e| PortalError::Action(s.lang, e))
}

fn hours(seconds: f64) -> String {
    format!("{:.2}", seconds / 3600.0)
}

/// A table of rows keyed by `key`, sorted by allocated hours (most first) or by key.
fn table(lang: Lang, id: &str, key: Label, mut rows: Vec<UsageRow>, by_name: bool) -> Markup {
    if by_name {
        rows.sort_by(|a, b| a.key.cmp(&b.key));
    } else {
        rows.sort_by(|a, b| b.allocated_seconds.total_cmp(&a.allocated_seconds));
    }
    html! {
        @if rows.is_empty() {
            p { (t(lang, Label::Nothing)) }
        } @else {
            table id=(id) {
                thead { tr {
                    th scope="col" { (t(lang, key)) }
                    th scope="col" { (t(lang, Label::Allocated)) }
                    th scope="col" { (t(lang, Label::Busy)) }
                } }
                tbody {
                    @for r in &rows {
                        tr {
                            td.key { (r.key) }
                            td.allocated { (hours(r.allocated_seconds)) }
                            td.busy { (hours(r.busy_seconds)) }
                        }
                    }
                }
            }
        }
    }
}

/// Per-day bars (allocated light, busy dark) for the last 30 days, drawn as SVG here.
fn chart(lang: Lang, days: &[UsageRow]) -> Markup {
    const W: f64 = 600.0;
    const H: f64 = 160.0;
    let today = Utc::now().date_naive();
    let span: Vec<String> = (0..30)
        .rev()
        .map(|back| {
            (today - Duration::days(back))
                .format("%Y-%m-%d")
                .to_string()
        })
        .collect();
    let most = days
        .iter()
        .map(|d| d.allocated_seconds)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let slot = W / span.len() as f64;
    html! {
        figure #usage-chart {
            figcaption { (t(lang, Label::PerDay)) }
            svg xmlns="http://www.w3.org/2000/svg" width=(W) height=(H + 16.0)
                viewBox={ "0 0 " (W) " " (H + 16.0) } role="img"
                aria-label=(t(lang, Label::PerDay)) {
                @for (i, day) in span.iter().enumerate() {
                    @let row = days.iter().find(|d| &d.key == day);
                    @let a = row.map_or(0.0, |r| r.allocated_seconds);
                    @let b = row.map_or(0.0, |r| r.busy_seconds);
                    @let (ha, hb) = (H * a / most, H * b / most);
                    @let x = i as f64 * slot + 1.0;
                    g.day data-day=(day) data-allocated-hours=(hours(a)) data-busy-hours=(hours(b)) {
                        title { (day) ": " (hours(a)) " / " (hours(b)) }
                        rect.allocated x=(x) y=(H - ha) width=(slot - 2.0) height=(ha) fill="#9ec5fe" {}
                        rect.busy x=(x) y=(H - hb) width=(slot - 2.0) height=(hb) fill="#0d6efd" {}
                    }
                }
                line x1="0" y1=(H) x2=(W) y2=(H) stroke="#666" {}
                text x="0" y=(H + 14.0) font-size="11" { (span[0]) }
                text x=(W) y=(H + 14.0) font-size="11" text-anchor="end" { (span[span.len() - 1]) }
            }
        }
    }
}

/// `GET /usage`.
pub async fn page(
    ctl: web::Data<Controller>,
    s: SignedIn,
    q: web::Query<PageQuery>,
) -> Result<HttpResponse, PortalError> {
    let lang = s.lang;
    let PageQuery { course, sort } = q.into_inner();
    let course = course.filter(|c| !c.is_empty());
    let by_name = sort.as_deref() == Some("name");
    let month = Some(month_start());
    let since_30 = Some(
        (Utc::now().date_naive() - Duration::days(29))
            .format("%Y-%m-%d")
            .to_string(),
    );
    let ask = |by: &str, since: &Option<String>| UsageQuery {
        course: course.clone(),
        by: Some(by.into()),
        since: since.clone(),
        ..UsageQuery::default()
    };
    let days = report(&ctl, &s, ask("day", &since_30)).await?;
    let staff = s.caller.role >= Role::Instructor;
    let main = if staff {
        table(
            lang,
            "usage-students",
            Label::Student,
            report(&ctl, &s, ask("student", &month)).await?,
            by_name,
        )
    } else {
        table(
            lang,
            "usage-courses",
            Label::Course,
            report(&ctl, &s, ask("course", &month)).await?,
            by_name,
        )
    };
    let admin = if s.caller.is_admin() {
        Some((
            report(&ctl, &s, ask("course", &month)).await?,
            report(&ctl, &s, ask("node", &month)).await?,
        ))
    } else {
        None
    };
    let link = |sort: &str| match &course {
        Some(c) => format!("/usage?course={}&sort={sort}", urlencoding(c)),
        None => format!("/usage?sort={sort}"),
    };
    let body = html! {
        h2 { (t(lang, Label::ThisMonth)) }
        @if staff {
            p.sort {
                a #sort-hours href=(link("hours")) { (t(lang, Label::SortByHours)) }
                " · "
                a #sort-name href=(link("name")) { (t(lang, Label::SortByName)) }
            }
        }
        (main)
        @if let Some((courses, nodes)) = admin {
            h2 { (t(lang, Label::Course)) }
            (table(lang, "usage-by-course", Label::Course, courses, by_name))
            h2 { (t(lang, Label::Node)) }
            (table(lang, "usage-by-node", Label::Node, nodes, by_name))
        }
        @if staff {
            p.downloads {
                @for by in ["student", "course", "node", "day"] {
                    a.csv href={ "/usage.csv?by=" (by) } download { (t(lang, Label::Download)) " (" (by) ")" }
                    " "
                }
            }
        }
        (chart(lang, &days))
    };
    Ok(layout::page(
        StatusCode::OK,
        lang,
        Some(&s),
        t(lang, Label::Title),
        body,
    ))
}

#[derive(Deserialize, Default)]
pub struct CsvQuery {
    by: Option<String>,
    course: Option<String>,
}

/// `GET /usage.csv`: this month's rows as CSV, hours and seconds.
pub async fn csv(
    ctl: web::Data<Controller>,
    s: SignedIn,
    q: web::Query<CsvQuery>,
) -> Result<HttpResponse, PortalError> {
    let CsvQuery { by, course } = q.into_inner();
    let by = by.unwrap_or_else(|| "student".into());
    let rows = report(
        &ctl,
        &s,
        UsageQuery {
            course: course.filter(|c| !c.is_empty()),
            by: Some(by.clone()),
            since: Some(month_start()),
            ..UsageQuery::default()
        },
    )
    .await?;
    let mut out = format!("{by},allocated_hours,busy_hours,allocated_seconds,busy_seconds\n");
    for r in rows {
        // Keys are usernames, course codes, node names or days: no commas or quotes, but a
        // cell is never taken as a spreadsheet formula.
        let key = r.key.trim_start_matches(['=', '+', '-', '@']);
        out.push_str(&format!(
            "{key},{},{},{:.0},{:.0}\n",
            hours(r.allocated_seconds),
            hours(r.busy_seconds),
            r.allocated_seconds,
            r.busy_seconds
        ));
    }
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/csv; charset=utf-8"))
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"gpu-time-by-{by}.csv\""),
        ))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .body(out))
}

/// A query value with everything but unreserved characters percent-encoded.
fn urlencoding(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
