//! The fleet gauges' reads: nodes, instances and operations by state, the queue, each course's
//! instances and GPU use, certificate expiries and storage pools (`crate::app::metrics` sets the
//! gauges from them).

use cohort_proto::api::instances::DesiredState;
use diesel::prelude::*;

/// The fleet as PostgreSQL has it, for the gauges.
#[derive(Debug, Default)]
pub struct Fleet {
    pub nodes: Vec<(String, i64)>,
    pub instances: Vec<(String, i64)>,
    pub queued: i64,
    pub operations: Vec<(String, String, i64)>,
    /// (course, instances, GPU processes, GPU memory bytes)
    pub courses: Vec<(String, i64, i64, i64)>,
    /// (node, Unix time its newest live certificate expires)
    pub certificates: Vec<(String, i64)>,
    /// (node, pool used bytes, pool total bytes) of the nodes that reported their pool.
    pub pools: Vec<(String, i64, i64)>,
}

/// Reads the fleet gauges from the database.
pub fn read_fleet(conn: &mut PgConnection) -> QueryResult<Fleet> {
    use crate::db::schema::{courses, instance_usage, instances, nodes, operations};
    use diesel::dsl::{count_star, sql};
    use diesel::sql_types::BigInt;
    let nodes = nodes::table
        .group_by(nodes::state)
        .select((nodes::state, count_star()))
        .load(conn)?;
    let instances = instances::table
        .group_by(instances::observed_state)
        .select((instances::observed_state, count_star()))
        .load(conn)?;
    let queued = instances::table
        .filter(instances::node_id.is_null())
        .filter(instances::desired_state.ne(DesiredState::Deleted))
        .count()
        .get_result(conn)?;
    let operations = operations::table
        .group_by((operations::kind, operations::status))
        .select((operations::kind, operations::status, count_star()))
        .load(conn)?;
    let courses: Vec<(String, i64, i64, i64)> = courses::table
        .left_join(instances::table.left_join(instance_usage::table))
        .group_by(courses::code)
        .select((
            courses::code,
            diesel::dsl::count(instances::id.nullable()),
            sql::<BigInt>("COALESCE(SUM(instance_usage.gpu_processes), 0)::bigint"),
            sql::<BigInt>("COALESCE(SUM(instance_usage.gpu_memory_used_bytes), 0)::bigint"),
        ))
        .load(conn)?;
    let certificates = crate::db::models::node_certificate::NodeCertificate::expiries(conn)?
        .into_iter()
        .map(|(node, at)| (node, at.timestamp()))
        .collect();
    let pools = nodes::table
        .filter(nodes::pool_total_bytes.gt(0))
        .order(nodes::name)
        .select((nodes::name, nodes::pool_used_bytes, nodes::pool_total_bytes))
        .load(conn)?;
    Ok(Fleet {
        nodes,
        instances,
        queued,
        operations,
        courses,
        certificates,
        pools,
    })
}
