//! What the API shows of an instance: its columns a page reads ([`ShownInstance`]), the rows
//! it refers to ([`InstanceRefs`], one join), and its recorded LXD config, read strictly.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cohort_proto::api::instances::{DesiredState, ObservedState};
use diesel::dsl;
use diesel::prelude::*;

use super::Instance;
use crate::db::models::instance_usage::UsageShown;
use crate::db::schema::{courses, images, instance_usage, instances, nodes, users};

/// What the API shows of the rows an instance refers to: its owner's name, its image's alias, its
/// node's name and SSH host, its course's code, and what the poller last saw of it.
#[derive(Debug, Clone, Default, Queryable, Selectable)]
#[diesel(check_for_backend(diesel::pg::Pg))]
pub struct InstanceRefs {
    #[diesel(select_expression = instances::id)]
    pub instance_id: i64,
    #[diesel(select_expression = users::username)]
    pub owner: String,
    #[diesel(select_expression = images::alias)]
    pub image: String,
    #[diesel(select_expression = nodes::name.nullable())]
    #[diesel(select_expression_type = dsl::Nullable<nodes::name>)]
    pub node: Option<String>,
    #[diesel(select_expression = nodes::ssh_host.nullable())]
    #[diesel(select_expression_type = dsl::Nullable<nodes::ssh_host>)]
    pub ssh_host: Option<String>,
    #[diesel(select_expression = courses::code.nullable())]
    #[diesel(select_expression_type = dsl::Nullable<courses::code>)]
    pub course: Option<String>,
    #[diesel(embed)]
    pub usage: Option<UsageShown>,
}

/// The columns of an instance the API shows (its references come with [`InstanceRefs`]): a page
/// of `GET /instances` reads these rather than every column of [`Instance`], as a third of the
/// values a page moved from PostgreSQL through libpq and diesel were never shown.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = instances, check_for_backend(diesel::pg::Pg))]
pub struct ShownInstance {
    pub id: i64,
    pub name: String,
    pub ssh_port: Option<i32>,
    pub desired_state: DesiredState,
    pub observed_state: ObservedState,
    pub cpu: i32,
    pub memory_mib: i64,
    pub disk_gib: i64,
    pub gpu_count: i32,
    pub priority: i32,
    pub config: serde_json::Value,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
    pub ssh_host_key: Option<String>,
    pub description: Option<String>,
}

impl From<Instance> for ShownInstance {
    fn from(i: Instance) -> Self {
        ShownInstance {
            id: i.id,
            name: i.name,
            ssh_port: i.ssh_port,
            desired_state: i.desired_state,
            observed_state: i.observed_state,
            cpu: i.cpu,
            memory_mib: i.memory_mib,
            disk_gib: i.disk_gib,
            gpu_count: i.gpu_count,
            priority: i.priority,
            config: i.config,
            error: i.error,
            created_at: i.created_at,
            last_seen_at: i.last_seen_at,
            description: i.description,
            ssh_host_key: i.ssh_host_key,
        }
    }
}

/// A row whose `config` is not a JSON object of strings: an error naming the instance rather than a
/// container made without its config.
#[derive(Debug, thiserror::Error)]
#[error("instance {instance}: its config is not a map of strings: {source}")]
pub struct BadConfig {
    pub instance: String,
    pub source: serde_json::Error,
}

/// The LXD config recorded for the instance `name` (its `config` column).
pub fn config_of(name: &str, config: &serde_json::Value) -> QueryResult<BTreeMap<String, String>> {
    serde_json::from_value(config.clone()).map_err(|source| {
        diesel::result::Error::DeserializationError(Box::new(BadConfig {
            instance: name.to_string(),
            source,
        }))
    })
}

impl ShownInstance {
    /// Its recorded LXD config (see [`config_of`]).
    pub fn config_map(&self) -> QueryResult<BTreeMap<String, String>> {
        config_of(&self.name, &self.config)
    }
}

/// `instances` joined to the rows [`InstanceRefs`] reads: an owner and an image always, a
/// node, a course and usage when there are.
#[dsl::auto_type(no_type_alias)]
pub fn with_refs() -> _ {
    instances::table
        .inner_join(users::table)
        .inner_join(images::table)
        .left_join(nodes::table)
        .left_join(courses::table)
        .left_join(instance_usage::table)
}

impl InstanceRefs {
    /// Those of these instances, in one query (one round trip instead of one per table).
    pub fn of_many(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<Vec<InstanceRefs>> {
        with_refs()
            .filter(instances::id.eq_any(ids))
            .select(InstanceRefs::as_select())
            .load(conn)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::config_of;

    #[test]
    fn a_config_that_is_not_a_map_of_strings_is_an_error_naming_the_instance() {
        let config = config_of("web-1", &json!({"user.a": "b"})).unwrap();
        assert_eq!(config.get("user.a").map(String::as_str), Some("b"));
        for bad in [
            json!({"limits.processes": 100}),
            json!(["user.a"]),
            json!("x"),
        ] {
            let error = config_of("web-1", &bad).unwrap_err().to_string();
            assert!(error.contains("instance web-1"), "{error}");
        }
    }
}
