//! `gpus`: each physical GPU or MIG instance a node reports, with its share limit.

use diesel::prelude::*;

use crate::db::schema::{gpu_allocations, gpus};

#[derive(Debug, Clone, Queryable, Selectable, Identifiable)]
#[diesel(table_name = gpus, check_for_backend(diesel::pg::Pg))]
pub struct Gpu {
    pub id: i64,
    pub node_id: i64,
    pub uuid: String,
    pub idx: i32,
    pub model: String,
    pub memory_bytes: i64,
    pub pci_address: String,
    pub mig_parent: Option<String>,
    pub share_limit: i32,
    pub present: bool,
}

/// A GPU as the inventory reports it; `share_limit` is an admin setting and is not touched.
#[derive(Debug, Insertable, AsChangeset)]
#[diesel(table_name = gpus)]
pub struct ReportedGpu<'a> {
    pub node_id: i64,
    pub uuid: &'a str,
    pub idx: i32,
    pub model: &'a str,
    pub memory_bytes: i64,
    pub pci_address: &'a str,
    pub mig_parent: Option<&'a str>,
    pub present: bool,
}

impl Gpu {
    /// Inserts or refreshes a reported GPU.
    pub fn upsert(conn: &mut PgConnection, gpu: &ReportedGpu<'_>) -> QueryResult<Gpu> {
        diesel::insert_into(gpus::table)
            .values(gpu)
            .on_conflict(gpus::uuid)
            .do_update()
            .set(gpu)
            .returning(Gpu::as_returning())
            .get_result(conn)
    }

    /// Marks absent the node's GPUs not in `seen` (they keep their allocations for reconciling).
    pub fn mark_missing(
        conn: &mut PgConnection,
        node_id: i64,
        seen: &[String],
    ) -> QueryResult<usize> {
        diesel::update(
            gpus::table
                .filter(gpus::node_id.eq(node_id))
                .filter(gpus::uuid.ne_all(seen)),
        )
        .set(gpus::present.eq(false))
        .execute(conn)
    }

    pub fn by_uuid(conn: &mut PgConnection, uuid: &str) -> QueryResult<Option<Gpu>> {
        gpus::table
            .filter(gpus::uuid.eq(uuid))
            .select(Gpu::as_select())
            .first(conn)
            .optional()
    }

    /// The models of the GPUs present in the fleet, each once, in order.
    pub fn present_models(conn: &mut PgConnection) -> QueryResult<Vec<String>> {
        gpus::table
            .filter(gpus::present)
            .select(gpus::model)
            .distinct()
            .order(gpus::model)
            .load(conn)
    }

    /// Every GPU with its number of live allocations.
    pub fn list_with_use(conn: &mut PgConnection) -> QueryResult<Vec<(Gpu, i64)>> {
        let all = gpus::table
            .order((gpus::node_id, gpus::idx, gpus::uuid))
            .select(Gpu::as_select())
            .load(conn)?;
        let used: Vec<(i64, i64)> = gpu_allocations::table
            .group_by(gpu_allocations::gpu_id)
            .select((gpu_allocations::gpu_id, diesel::dsl::count_star()))
            .load(conn)?;
        Ok(all
            .into_iter()
            .map(|g| {
                let n = used
                    .iter()
                    .find(|(id, _)| *id == g.id)
                    .map_or(0, |(_, n)| *n);
                (g, n)
            })
            .collect())
    }

    pub fn set_share_limit(conn: &mut PgConnection, id: i64, limit: i32) -> QueryResult<Gpu> {
        diesel::update(gpus::table.find(id))
            .set(gpus::share_limit.eq(limit))
            .returning(Gpu::as_returning())
            .get_result(conn)
    }

    /// How many GPUs each node has: (node id, count).
    pub fn count_by_node(conn: &mut PgConnection) -> QueryResult<Vec<(i64, i64)>> {
        gpus::table
            .group_by(gpus::node_id)
            .select((gpus::node_id, diesel::dsl::count_star()))
            .load(conn)
    }
}
