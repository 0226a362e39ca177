//! `instances`: each student container, what is desired of it and what was last seen. The row
//! and its own verbs are here; what the API shows of it in `shown.rs`, the queries over a whole
//! course's instances in `course.rs`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use cohort_proto::api::instances::{DesiredState, GpuShare, ObservedState, PlacementStrategy};
use diesel::prelude::*;

use crate::db::schema::instances;

mod course;
mod shown;

pub use course::{Endpoint, OffLimits};
pub use shown::{config_of, with_refs, BadConfig, InstanceRefs, ShownInstance};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = instances, check_for_backend(diesel::pg::Pg))]
pub struct Instance {
    pub id: i64,
    pub name: String,
    pub owner_id: i64,
    pub course_id: Option<i64>,
    pub image_id: i64,
    pub node_id: Option<i64>,
    pub ssh_port: Option<i32>,
    pub desired_state: DesiredState,
    pub observed_state: ObservedState,
    pub cpu: i32,
    pub memory_mib: i64,
    pub disk_gib: i64,
    pub gpu_count: i32,
    pub gpu_model: Option<String>,
    pub gpu_share: GpuShare,
    pub strategy: PlacementStrategy,
    pub priority: i32,
    pub config: serde_json::Value,
    pub error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub last_seen_at: Option<DateTime<Utc>>,
    /// `ssh-ed25519 AAAA...` as the agent made it for this container (see the agent's
    /// `host_key`); `None` before the container is made or when it has no SSH access.
    pub ssh_host_key: Option<String>,
    /// Its course's `--gpu-share N`: it shares a GPU with at most N - 1 others.
    pub gpu_share_count: Option<i32>,
    /// Its home volume's size as placement reserves it, in whole GiB (0 outside a course).
    pub home_gib: i32,
    /// What LXD's clients gave as its description, if anything.
    pub description: Option<String>,
}

/// A new row; `Serialize` gives the columns by name, as placement inserts a placed row with them.
#[derive(Debug, Insertable, serde::Serialize)]
#[diesel(table_name = instances)]
pub struct NewInstance<'a> {
    pub name: &'a str,
    pub owner_id: i64,
    pub course_id: Option<i64>,
    pub image_id: i64,
    pub desired_state: DesiredState,
    pub observed_state: ObservedState,
    pub cpu: i32,
    pub memory_mib: i64,
    pub disk_gib: i64,
    pub gpu_count: i32,
    pub gpu_model: Option<&'a str>,
    pub gpu_share: GpuShare,
    pub gpu_share_count: Option<i32>,
    /// The home volume's size placement reserves, in whole GiB (0 outside a course).
    pub home_gib: i32,
    pub strategy: PlacementStrategy,
    pub priority: i32,
    pub config: serde_json::Value,
}

impl Instance {
    /// Its recorded LXD config (see [`config_of`]).
    pub fn config_map(&self) -> QueryResult<BTreeMap<String, String>> {
        config_of(&self.name, &self.config)
    }

    pub fn insert(conn: &mut PgConnection, new: &NewInstance<'_>) -> QueryResult<Instance> {
        diesel::insert_into(instances::table)
            .values(new)
            .returning(Instance::as_returning())
            .get_result(conn)
    }

    pub fn find(conn: &mut PgConnection, id: i64) -> QueryResult<Instance> {
        instances::table
            .find(id)
            .select(Instance::as_select())
            .first(conn)
    }

    pub fn by_name(conn: &mut PgConnection, name: &str) -> QueryResult<Option<Instance>> {
        instances::table
            .filter(instances::name.eq(name))
            .select(Instance::as_select())
            .first(conn)
            .optional()
    }

    /// Which of `names` instances already have, in one query.
    pub fn taken_names<'a>(
        conn: &mut PgConnection,
        names: impl IntoIterator<Item = &'a String>,
    ) -> QueryResult<std::collections::HashSet<String>> {
        let names: Vec<&String> = names.into_iter().collect();
        Ok(instances::table
            .filter(instances::name.eq_any(names))
            .select(instances::name)
            .load::<String>(conn)?
            .into_iter()
            .collect())
    }

    /// The instances with these ids (those that exist), in no order.
    pub fn by_ids(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<Vec<Instance>> {
        instances::table
            .filter(instances::id.eq_any(ids))
            .select(Instance::as_select())
            .load(conn)
    }

    pub fn list(conn: &mut PgConnection, owner: Option<i64>) -> QueryResult<Vec<Instance>> {
        let mut q = instances::table.select(Instance::as_select()).into_boxed();
        if let Some(owner) = owner {
            q = q.filter(instances::owner_id.eq(owner));
        }
        q.order(instances::name).load(conn)
    }

    pub fn on_node(conn: &mut PgConnection, node_id: i64) -> QueryResult<Vec<Instance>> {
        instances::table
            .filter(instances::node_id.eq(node_id))
            .order(instances::name)
            .select(Instance::as_select())
            .load(conn)
    }

    /// The queue: unplaced instances still wanted (not those whose create failed for good),
    /// highest priority first, then oldest.
    pub fn queued(conn: &mut PgConnection, limit: i64) -> QueryResult<Vec<Instance>> {
        instances::table
            .filter(instances::node_id.is_null())
            .filter(instances::desired_state.ne(DesiredState::Deleted))
            .filter(instances::observed_state.ne(ObservedState::Error))
            .order((
                instances::priority.desc(),
                instances::created_at,
                instances::id,
            ))
            .limit(limit)
            .select(Instance::as_select())
            .load(conn)
    }

    /// Locks one row, skipping it if another transaction holds it.
    pub fn lock_skip(conn: &mut PgConnection, id: i64) -> QueryResult<Option<Instance>> {
        instances::table
            .find(id)
            .for_update()
            .skip_locked()
            .select(Instance::as_select())
            .first(conn)
            .optional()
    }

    /// A create that failed for good: no node, no port, the `error` state and why. The queue
    /// passes over it (see [`Instance::queued`]) until it is provisioned again or deleted.
    pub fn fail_placement(conn: &mut PgConnection, id: i64, why: &str) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((
                instances::node_id.eq(None::<i64>),
                instances::ssh_port.eq(None::<i32>),
                instances::observed_state.eq(ObservedState::Error),
                instances::error.eq(why),
            ))
            .execute(conn)
    }

    /// Marks a create failed for good that may have left its container on its node: the error
    /// shows, the node and port stay (so its delete goes there and removes the container).
    pub fn fail_in_place(conn: &mut PgConnection, id: i64, why: &str) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((
                instances::observed_state.eq(ObservedState::Error),
                instances::error.eq(why),
            ))
            .execute(conn)
    }

    /// Puts a failed instance back in the queue (a provision tries it again).
    pub fn requeue(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::update(
            instances::table
                .find(id)
                .filter(instances::node_id.is_null()),
        )
        .set((
            instances::observed_state.eq(ObservedState::Queued),
            instances::error.eq(None::<String>),
        ))
        .execute(conn)
    }

    /// Records the config keys set on the live instance (the ones a request may set).
    pub fn set_config(
        conn: &mut PgConnection,
        id: i64,
        config: serde_json::Value,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set(instances::config.eq(config))
            .execute(conn)
    }

    pub fn set_desired(
        conn: &mut PgConnection,
        id: i64,
        state: DesiredState,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set(instances::desired_state.eq(state))
            .execute(conn)
    }

    /// Sets the description LXD's clients see (`None`: none).
    pub fn set_description(
        conn: &mut PgConnection,
        id: i64,
        description: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set(instances::description.eq(description))
            .execute(conn)
    }

    /// Why the instance is not as desired (e.g. a start waiting for a GPU), or `None`.
    pub fn set_error(conn: &mut PgConnection, id: i64, error: Option<&str>) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set(instances::error.eq(error))
            .execute(conn)
    }

    pub fn set_observed(
        conn: &mut PgConnection,
        id: i64,
        state: ObservedState,
        error: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((
                instances::observed_state.eq(state),
                instances::error.eq(error),
                instances::last_seen_at.eq(Utc::now()),
            ))
            .execute(conn)
    }

    /// What a create on the node returned: its state and the host key it was given.
    pub fn set_created(
        conn: &mut PgConnection,
        id: i64,
        state: ObservedState,
        ssh_host_key: Option<&str>,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((
                instances::observed_state.eq(state),
                instances::error.eq(None::<String>),
                instances::last_seen_at.eq(Utc::now()),
                instances::ssh_host_key.eq(ssh_host_key),
            ))
            .execute(conn)
    }

    /// Every placed instance of a node shows `unknown` (its node went offline).
    pub fn mark_unknown_on(conn: &mut PgConnection, node_id: i64) -> QueryResult<usize> {
        diesel::update(
            instances::table
                .filter(instances::node_id.eq(node_id))
                .filter(instances::observed_state.ne(ObservedState::Pending)),
        )
        .set(instances::observed_state.eq(ObservedState::Unknown))
        .execute(conn)
    }

    pub fn delete(conn: &mut PgConnection, id: i64) -> QueryResult<usize> {
        diesel::delete(instances::table.find(id)).execute(conn)
    }

    /// Locks the row until the transaction ends.
    pub fn lock(conn: &mut PgConnection, id: i64) -> QueryResult<Instance> {
        instances::table
            .find(id)
            .for_update()
            .select(Instance::as_select())
            .first(conn)
    }

    /// Makes the instance node `node_id`'s, reached on `port`, stopped there until it starts.
    pub fn move_to(
        conn: &mut PgConnection,
        id: i64,
        node_id: i64,
        port: i32,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((
                instances::node_id.eq(node_id),
                instances::ssh_port.eq(port),
                instances::observed_state.eq(ObservedState::Stopped),
            ))
            .execute(conn)
    }

    pub fn set_cpu_memory(
        conn: &mut PgConnection,
        id: i64,
        cpu: i32,
        memory_mib: i64,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.find(id))
            .set((instances::cpu.eq(cpu), instances::memory_mib.eq(memory_mib)))
            .execute(conn)
    }

    /// Makes account `to` the owner of every instance account `from` owns.
    pub fn give_all_to(conn: &mut PgConnection, from: i64, to: i64) -> QueryResult<usize> {
        diesel::update(instances::table.filter(instances::owner_id.eq(from)))
            .set(instances::owner_id.eq(to))
            .execute(conn)
    }

    /// How many instances each node has (`None`: on none): (node id, count).
    pub fn count_by_node(conn: &mut PgConnection) -> QueryResult<Vec<(Option<i64>, i64)>> {
        instances::table
            .group_by(instances::node_id)
            .select((instances::node_id, diesel::dsl::count_star()))
            .load(conn)
    }

    /// Writes an adopted orphan's row: on node `node_id`, reached on `port`, with its limits
    /// (cpu, memory MiB, disk GiB).
    #[allow(clippy::too_many_arguments)]
    pub fn insert_adopted(
        conn: &mut PgConnection,
        name: &str,
        owner_id: i64,
        image_id: i64,
        node_id: i64,
        port: Option<i32>,
        desired: DesiredState,
        observed: ObservedState,
        (cpu, memory_mib, disk_gib): (i32, i64, i64),
    ) -> QueryResult<usize> {
        diesel::insert_into(instances::table)
            .values((
                instances::name.eq(name),
                instances::owner_id.eq(owner_id),
                instances::image_id.eq(image_id),
                instances::node_id.eq(node_id),
                instances::ssh_port.eq(port),
                instances::desired_state.eq(desired),
                instances::observed_state.eq(observed),
                instances::cpu.eq(cpu),
                instances::memory_mib.eq(memory_mib),
                instances::disk_gib.eq(disk_gib),
            ))
            .execute(conn)
    }
}
