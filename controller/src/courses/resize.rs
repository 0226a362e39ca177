//! A course's new cores and memory reaching its containers already made: each one's row takes
//! them where its node has room (counted as placement counts it), and a step of the course's
//! `set_course_limits` operation has its agent apply them to the container live (LXD sets a
//! running container's cgroup at once, a stopped one's at its next start). The root disk is
//! not resized: it keeps the size it was made with.

use cohort_proto::api::instances::ObservedState;
use cohort_proto::api::nodes::NodeState;
use diesel::prelude::*;

use crate::app::config::PlacementConfig;
use crate::db::models::course::Course;
use crate::db::models::instance::Instance;
use crate::db::models::node::Node;

/// What becomes of one container made on a node.
#[derive(Debug, PartialEq, Eq)]
pub enum Resize {
    /// Its row has the new cores and memory; a step applies them to the container.
    Live,
    /// Its cores and memory are the course's already.
    Same,
    /// It keeps its cores and memory, for this reason.
    Kept(String),
}

/// Gives `instance` (made on a node) the course's cores and memory where its node has room.
/// Growing needs room under the node's capacity with the overcommit placement allows (as
/// `cohort_node_fits` in placement.sql counts it); shrinking always fits. The instance's row
/// and then its node's are locked, in the order a move or a placement takes them, so the
/// node's counters (kept by trigger) are read and changed by one transaction at a time.
pub fn resize(
    conn: &mut PgConnection,
    instance_id: i64,
    course: &Course,
    config: &PlacementConfig,
) -> QueryResult<Resize> {
    let instance = Instance::lock(conn, instance_id)?;
    let Some(node_id) = instance.node_id else {
        return Ok(Resize::Same);
    };
    if instance.cpu == course.cpu && instance.memory_mib == course.memory_mib {
        return Ok(Resize::Same);
    }
    if !matches!(
        instance.observed_state,
        ObservedState::Running | ObservedState::Stopped
    ) {
        return Ok(Resize::Kept(format!(
            "it is {} (being made or changed), so it keeps the limits it has",
            instance.observed_state
        )));
    }
    let (name, state, cores, cpu_used, memory_bytes, memory_used): (
        String,
        NodeState,
        i32,
        i64,
        i64,
        i64,
    ) = Node::lock_load(conn, node_id)?;
    // Cordoned takes no new containers but still runs and changes the ones it has.
    if !matches!(state, NodeState::Online | NodeState::Cordoned) {
        return Ok(Resize::Kept(format!("its node {name} is {state}")));
    }
    let (cpu, memory) = (i64::from(course.cpu), course.memory_mib);
    let cpu_after = cpu_used - i64::from(instance.cpu) + cpu;
    if course.cpu > instance.cpu && cpu_after as f64 > f64::from(cores) * config.cpu_overcommit {
        return Ok(Resize::Kept(format!(
            "its node {name} has no room to give it {cpu} cores"
        )));
    }
    let memory_after = memory_used - instance.memory_mib + memory;
    let memory_room = (memory_bytes / (1 << 20)) as f64 * config.memory_overcommit;
    if memory > instance.memory_mib && memory_after as f64 > memory_room {
        return Ok(Resize::Kept(format!(
            "its node {name} has no room to give it {memory} MiB of memory"
        )));
    }
    Instance::set_cpu_memory(conn, instance.id, course.cpu, course.memory_mib)?;
    Ok(Resize::Live)
}
