//! Queries that span tables or serve one feature as a whole (placement's SQL functions, the
//! capacity placement's neighbours read, the instance page, the metrics gauges, reclaim's scans,
//! the backup's reads, the database's clock and the renewal lock, the pruner's deletes), called
//! by the feature modules; a query on one table is its model's.

pub mod backup;
pub mod capacity;
pub mod coordination;
pub mod gpu_usage;
pub mod metrics;
pub mod page;
pub mod placement;
pub mod reclaim;
pub mod reclaim_use;
pub mod retention;
