//! `cohort list`: every instance the caller may see in one call, filtered and shown as lxc does.

use cohort_proto::api::instances::{Instance, ObservedState};
use serde_json::Value;

use super::Session;
use crate::args::list::List;
use crate::columns::{self, Column};
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: List) -> anyhow::Result<()> {
    let spec = if args.fast {
        columns::FAST
    } else {
        &args.columns
    };
    let columns = Column::parse_list(spec)?;
    let (remote, filters) = split_remote(&args.filters);
    let client = session.remote_only(remote)?;
    let mut instances: Vec<Instance> = client.get_all("/instances").await?;
    instances.retain(|i| filters.iter().all(|f| matches(i, f)));
    instances.sort_by(|a, b| a.name.cmp(&b.name));

    let mut rows = Rows::new(columns.iter().map(|c| c.header()));
    for instance in &instances {
        rows.push(columns.iter().map(|c| c.cell(instance)));
    }
    let objects: Vec<Value> = instances.iter().map(lxc_shaped).collect();
    render::print(args.format, &rows, &objects)
}

/// A leading `remote:` (or `remote:filter`) among the filters names the remote, as in
/// `lxc list lab:` or `lxc list lab:web`; a `key=value` filter whose value holds ':' is no remote.
pub fn split_remote(filters: &[String]) -> (Option<&str>, Vec<&str>) {
    let mut rest: Vec<&str> = filters.iter().map(String::as_str).collect();
    let Some(first) = rest.first().copied() else {
        return (None, rest);
    };
    match first.split_once(':') {
        Some((remote, filter)) if !remote.contains('=') => {
            if filter.is_empty() {
                rest.remove(0);
            } else {
                rest[0] = filter;
            }
            (Some(remote), rest)
        }
        _ => (None, rest),
    }
}

/// lxc's filter forms that apply: a name prefix, or `key=value` on status, location, owner and
/// course (status compares case-insensitively, as lxc's does).
pub fn matches(instance: &Instance, filter: &str) -> bool {
    match filter.split_once('=') {
        None => instance.name.starts_with(filter),
        Some((key, value)) => match key {
            "status" | "state" => {
                render::wire_name(instance.observed_state).eq_ignore_ascii_case(value)
            }
            "location" | "node" => instance.node.as_deref() == Some(value),
            "owner" => instance.owner == value,
            "course" => instance.course.as_deref() == Some(value),
            other => instance.config.get(other).map(String::as_str) == Some(value),
        },
    }
}

/// The API's instance plus the names lxc's JSON uses for the same facts (`status`, `location`,
/// `type`), so scripts written for `lxc list --format json` find them.
pub fn lxc_shaped(instance: &Instance) -> Value {
    let mut value = serde_json::to_value(instance).expect("instances serialize");
    let status = lxc_status(instance.observed_state);
    if let Value::Object(map) = &mut value {
        map.insert("status".into(), Value::from(status));
        map.insert(
            "location".into(),
            Value::from(instance.node.clone().unwrap_or_default()),
        );
        map.insert("type".into(), Value::from("container"));
    }
    value
}

/// LXD's capitalised status word.
pub fn lxc_status(state: ObservedState) -> String {
    let word = render::wire_name(state);
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => word,
    }
}
