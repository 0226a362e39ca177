//! `cohort audit list`: pages through `GET /audit` (by `next_before`) until `--limit` entries
//! or the oldest entry.

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use cohort_proto::api::audit::{AuditEntry, AuditPage};

use super::Session;
use crate::args::audit::{Audit, AuditCommand, AuditList};
use crate::render::{self, Rows};

/// The controller's largest page.
const PAGE: u32 = 1000;

pub async fn run(session: &Session, args: Audit) -> anyhow::Result<()> {
    match args.command {
        AuditCommand::List(list) => self::list(session, list).await,
    }
}

async fn list(session: &Session, args: AuditList) -> anyhow::Result<()> {
    if args.limit == 0 {
        return Err(anyhow!("--limit must be at least 1"));
    }
    let since = match &args.since {
        None => None,
        Some(raw) => Some(
            DateTime::parse_from_rfc3339(raw)
                .map_err(|e| anyhow!("Invalid --since {raw:?}: {e} (expected RFC 3339)"))?
                .with_timezone(&Utc),
        ),
    };
    let client = session.remote_only(args.remote.as_deref())?;
    let mut entries: Vec<AuditEntry> = Vec::new();
    let mut before: Option<i64> = None;
    loop {
        let want = (args.limit - entries.len() as u32).min(PAGE);
        let mut query: Vec<(&str, String)> = vec![("limit", want.to_string())];
        let filters = [
            ("actor", &args.actor),
            ("action", &args.action),
            ("object_kind", &args.object_kind),
            ("object", &args.object),
        ];
        for (key, value) in filters {
            if let Some(v) = value {
                query.push((key, v.clone()));
            }
        }
        if let Some(since) = since {
            query.push(("since", since.to_rfc3339()));
        }
        if let Some(before) = before {
            query.push(("before", before.to_string()));
        }
        let request = client.request(reqwest::Method::GET, "/audit").query(&query);
        let page: AuditPage = client.json(request).await?;
        entries.extend(page.entries);
        match page.next_before {
            Some(next) if (entries.len() as u32) < args.limit => before = Some(next),
            _ => break,
        }
    }

    let mut rows = Rows::new(["ID", "TIME", "ACTOR", "ACTION", "KIND", "OBJECT", "DETAIL"]);
    for e in &entries {
        rows.push([
            e.id.to_string(),
            e.created_at.format("%Y/%m/%d %H:%M:%S UTC").to_string(),
            e.actor.clone(),
            e.action.clone(),
            e.object_kind.clone(),
            e.object.clone(),
            detail(&e.detail),
        ]);
    }
    render::print(args.format, &rows, &entries)
}

/// The detail object as `key=value` pairs (strings unquoted), or nothing when empty.
fn detail(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}
