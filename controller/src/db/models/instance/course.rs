//! The queries over a whole course's instances: their endpoints, limits, homes and names.

use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;

use super::Instance;
use crate::db::schema::{instances, nodes, users};

impl Instance {
    /// Sets what the instances of course `course_id` reserve for their homes.
    pub fn set_home_gib_of_course(
        conn: &mut PgConnection,
        course_id: i64,
        gib: i32,
    ) -> QueryResult<usize> {
        diesel::update(instances::table.filter(instances::course_id.eq(course_id)))
            .set(instances::home_gib.eq(gib))
            .execute(conn)
    }

    /// The placed instances of course `course_id`: owner, name, node name, node SSH host, SSH
    /// port and host key.
    pub fn endpoints_of_course(
        conn: &mut PgConnection,
        course_id: i64,
    ) -> QueryResult<Vec<Endpoint>> {
        instances::table
            .inner_join(nodes::table)
            .filter(instances::course_id.eq(course_id))
            .select((
                instances::owner_id,
                instances::name,
                nodes::name,
                nodes::ssh_host,
                instances::ssh_port,
                instances::ssh_host_key,
            ))
            .load(conn)
    }

    /// Gives the instances of course `course_id` on no node these limits; returns their names.
    pub fn resize_unplaced_of_course(
        conn: &mut PgConnection,
        course_id: i64,
        cpu: i32,
        memory_mib: i64,
        disk_gib: i64,
    ) -> QueryResult<Vec<String>> {
        diesel::update(
            instances::table
                .filter(instances::course_id.eq(course_id))
                .filter(instances::node_id.is_null()),
        )
        .set((
            instances::cpu.eq(cpu),
            instances::memory_mib.eq(memory_mib),
            instances::disk_gib.eq(disk_gib),
        ))
        .returning(instances::name)
        .get_results(conn)
    }

    /// The instances of course `course_id` on a node, not deleted, whose limits differ from
    /// these: name, owner's username, cpu, memory, disk; by name.
    pub fn placed_off_limits_of_course(
        conn: &mut PgConnection,
        course_id: i64,
        cpu: i32,
        memory_mib: i64,
        disk_gib: i64,
    ) -> QueryResult<Vec<OffLimits>> {
        instances::table
            .inner_join(users::table)
            .filter(instances::course_id.eq(course_id))
            .filter(instances::node_id.is_not_null())
            .filter(instances::desired_state.ne(DesiredState::Deleted))
            .filter(
                instances::cpu
                    .ne(cpu)
                    .or(instances::memory_mib.ne(memory_mib))
                    .or(instances::disk_gib.ne(disk_gib)),
            )
            .order(instances::name)
            .select((
                instances::name,
                users::username,
                instances::cpu,
                instances::memory_mib,
                instances::disk_gib,
            ))
            .load(conn)
    }

    /// The instances of course `course_id`.
    pub fn of_course(conn: &mut PgConnection, course_id: i64) -> QueryResult<Vec<Instance>> {
        instances::table
            .filter(instances::course_id.eq(course_id))
            .select(Instance::as_select())
            .load(conn)
    }

    /// The instances of course `course_id`, each with its node's name when it has one.
    pub fn of_course_with_node(
        conn: &mut PgConnection,
        course_id: i64,
    ) -> QueryResult<Vec<(Instance, Option<String>)>> {
        instances::table
            .left_join(nodes::table)
            .filter(instances::course_id.eq(course_id))
            .select((Instance::as_select(), nodes::name.nullable()))
            .load(conn)
    }

    /// The names of the instances of courses `ids`.
    pub fn names_in_courses(conn: &mut PgConnection, ids: &[i64]) -> QueryResult<Vec<String>> {
        instances::table
            .filter(instances::course_id.eq_any(ids))
            .select(instances::name)
            .load(conn)
    }
}

/// A placed instance of a course: owner, name, node name, node SSH host, SSH port, host key.
pub type Endpoint = (i64, String, String, String, Option<i32>, Option<String>);

/// An instance whose limits differ from its course's: name, owner's username, cpu, memory MiB,
/// disk GiB.
pub type OffLimits = (String, String, i32, i64, i64);
