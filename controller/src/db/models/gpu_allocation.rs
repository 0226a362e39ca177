//! `gpu_allocations`: numbered slots of a GPU held by instances (see the migration for why the
//! database alone keeps them under `share_limit`).

use diesel::prelude::*;

use crate::db::schema::{gpu_allocations, gpus};

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = gpu_allocations, check_for_backend(diesel::pg::Pg))]
pub struct GpuAllocation {
    pub gpu_id: i64,
    pub share_limit: i32,
    pub slot: i32,
    pub instance_id: i64,
}

/// A GPU slot an instance holds, as the API shows it.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = gpu_allocations, check_for_backend(diesel::pg::Pg))]
pub struct HeldGpu {
    #[diesel(select_expression = gpus::uuid)]
    pub uuid: String,
    #[diesel(select_expression = gpus::model)]
    pub model: String,
    pub slot: i32,
}

impl GpuAllocation {
    /// The slots taken on a GPU.
    pub fn slots(conn: &mut PgConnection, gpu_id: i64) -> QueryResult<Vec<i32>> {
        gpu_allocations::table
            .filter(gpu_allocations::gpu_id.eq(gpu_id))
            .select(gpu_allocations::slot)
            .load(conn)
    }

    /// The GPUs (with slot) an instance holds.
    pub fn for_instance(
        conn: &mut PgConnection,
        instance_id: i64,
    ) -> QueryResult<Vec<(super::gpu::Gpu, i32)>> {
        gpu_allocations::table
            .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
            .filter(gpu_allocations::instance_id.eq(instance_id))
            .order(gpus::idx)
            .select((super::gpu::Gpu::as_select(), gpu_allocations::slot))
            .load(conn)
    }

    /// The GPUs each of these instances holds, as the API shows them, in GPU index order, by
    /// instance id.
    pub fn held_by(
        conn: &mut PgConnection,
        instance_ids: &[i64],
    ) -> QueryResult<std::collections::HashMap<i64, Vec<HeldGpu>>> {
        let rows: Vec<(i64, HeldGpu)> = gpu_allocations::table
            .inner_join(gpus::table.on(gpus::id.eq(gpu_allocations::gpu_id)))
            .filter(gpu_allocations::instance_id.eq_any(instance_ids))
            .order((gpu_allocations::instance_id, gpus::idx))
            .select((gpu_allocations::instance_id, HeldGpu::as_select()))
            .load(conn)?;
        let mut by_instance = std::collections::HashMap::<i64, Vec<_>>::new();
        for (instance, gpu) in rows {
            by_instance.entry(instance).or_default().push(gpu);
        }
        Ok(by_instance)
    }

    pub fn release(conn: &mut PgConnection, instance_id: i64) -> QueryResult<usize> {
        diesel::delete(gpu_allocations::table.filter(gpu_allocations::instance_id.eq(instance_id)))
            .execute(conn)
    }
}
