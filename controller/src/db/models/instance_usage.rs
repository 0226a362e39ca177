//! `instance_usage`: what the poller saw of an instance's GPU use and current run, and why the
//! reclaimer stopped it.

use chrono::{DateTime, Utc};
use diesel::prelude::*;

use crate::db::schema::instance_usage;

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = instance_usage, check_for_backend(diesel::pg::Pg))]
pub struct InstanceUsage {
    pub instance_id: i64,
    /// Per GPU uuid: `{"processes", "memory_used_bytes", "memory_share"}`.
    pub gpus: serde_json::Value,
    pub gpu_processes: i32,
    pub gpu_memory_used_bytes: i64,
    pub gpu_active_at: Option<DateTime<Utc>>,
    pub running_since: Option<DateTime<Utc>>,
    pub stop_reason: Option<String>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    pub gpus_detached_at: Option<DateTime<Utc>>,
    pub detach_reason: Option<String>,
}

/// What the API shows of a row (see `views::instance`).
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = instance_usage, check_for_backend(diesel::pg::Pg))]
pub struct UsageShown {
    pub gpus: serde_json::Value,
    pub gpu_active_at: Option<DateTime<Utc>>,
    pub stop_reason: Option<String>,
    pub stopped_at: Option<DateTime<Utc>>,
    pub gpus_detached_at: Option<DateTime<Utc>>,
    pub detach_reason: Option<String>,
}

/// One poll's view of an instance.
pub struct Observed {
    pub running: bool,
    pub gpus: serde_json::Value,
    pub gpu_processes: i32,
    pub gpu_memory_used_bytes: i64,
    /// Its GPU counts as in use (`app::gpu_time::Held::busy`): `gpu_active_at` moves on.
    pub gpu_busy: bool,
}

impl InstanceUsage {
    /// Records a poll: GPU use now, when it was last active, and when the current run began
    /// (kept while it runs, cleared when it is not running).
    pub fn observe(conn: &mut PgConnection, id: i64, seen: &Observed) -> QueryResult<()> {
        // Every time here is the database's clock: the reclaimer compares them with it.
        type Stamp = diesel::sql_types::Nullable<diesel::sql_types::Timestamptz>;
        let db_now = || diesel::dsl::sql::<diesel::sql_types::Timestamptz>("now()");
        let stamp = |set: bool| diesel::dsl::sql::<Stamp>(if set { "now()" } else { "NULL" });
        diesel::insert_into(instance_usage::table)
            .values((
                instance_usage::instance_id.eq(id),
                instance_usage::gpus.eq(&seen.gpus),
                instance_usage::gpu_processes.eq(seen.gpu_processes),
                instance_usage::gpu_memory_used_bytes.eq(seen.gpu_memory_used_bytes),
                instance_usage::gpu_active_at.eq(stamp(seen.gpu_busy)),
                instance_usage::running_since.eq(stamp(seen.running)),
                instance_usage::updated_at.eq(db_now()),
            ))
            .on_conflict(instance_usage::instance_id)
            .do_update()
            .set((
                instance_usage::gpus.eq(&seen.gpus),
                instance_usage::gpu_processes.eq(seen.gpu_processes),
                instance_usage::gpu_memory_used_bytes.eq(seen.gpu_memory_used_bytes),
                instance_usage::gpu_active_at.eq(diesel::dsl::sql::<Stamp>(if seen.gpu_busy {
                    "now()"
                } else {
                    "instance_usage.gpu_active_at"
                })),
                instance_usage::running_since.eq(diesel::dsl::sql::<Stamp>(if seen.running {
                    "COALESCE(instance_usage.running_since, now())"
                } else {
                    "NULL"
                })),
                instance_usage::updated_at.eq(db_now()),
            ))
            .execute(conn)
            .map(|_| ())
    }

    /// Records why the reclaimer stopped an instance.
    pub fn set_stopped(conn: &mut PgConnection, id: i64, reason: &str) -> QueryResult<()> {
        let now = crate::db::queries::coordination::clock(conn)?;
        diesel::insert_into(instance_usage::table)
            .values((
                instance_usage::instance_id.eq(id),
                instance_usage::stop_reason.eq(reason),
                instance_usage::stopped_at.eq(now),
            ))
            .on_conflict(instance_usage::instance_id)
            .do_update()
            .set((
                instance_usage::stop_reason.eq(reason),
                instance_usage::stopped_at.eq(now),
            ))
            .execute(conn)
            .map(|_| ())
    }

    /// Records why the reclaimer took an instance's GPUs (it keeps running without them).
    pub fn set_detached(conn: &mut PgConnection, id: i64, reason: &str) -> QueryResult<()> {
        let now = crate::db::queries::coordination::clock(conn)?;
        diesel::insert_into(instance_usage::table)
            .values((
                instance_usage::instance_id.eq(id),
                instance_usage::detach_reason.eq(reason),
                instance_usage::gpus_detached_at.eq(now),
            ))
            .on_conflict(instance_usage::instance_id)
            .do_update()
            .set((
                instance_usage::detach_reason.eq(reason),
                instance_usage::gpus_detached_at.eq(now),
            ))
            .execute(conn)
            .map(|_| ())
    }

    /// Forgets the stop reason (someone started the instance again).
    /// Its GPUs are back: the reclaimer may detach them again after the next idle window, which
    /// starts now (`gpus_attached_at`).
    pub fn clear_detached(conn: &mut PgConnection, id: i64) -> QueryResult<()> {
        let now = crate::db::queries::coordination::clock(conn)?;
        diesel::update(instance_usage::table.find(id))
            .set((
                instance_usage::detach_reason.eq(None::<String>),
                instance_usage::gpus_detached_at.eq(None::<DateTime<Utc>>),
                instance_usage::gpus_attached_at.eq(now),
            ))
            .execute(conn)
            .map(|_| ())
    }

    /// Why instance `id`'s GPUs were last detached, if they are.
    pub fn detach_reason_of(conn: &mut PgConnection, id: i64) -> QueryResult<Option<String>> {
        Ok(instance_usage::table
            .find(id)
            .select(instance_usage::detach_reason)
            .first::<Option<String>>(conn)
            .optional()?
            .flatten())
    }

    pub fn clear_stopped(conn: &mut PgConnection, id: i64) -> QueryResult<()> {
        diesel::update(instance_usage::table.find(id))
            .set((
                instance_usage::stop_reason.eq(None::<String>),
                instance_usage::stopped_at.eq(None::<DateTime<Utc>>),
            ))
            .execute(conn)
            .map(|_| ())
    }

    /// Records JupyterLab's own account of the instance's use: a kernel or terminal active
    /// `age_s` seconds ago (0: a kernel executing now). Only moves forward.
    pub fn note_notebook_use(
        conn: &mut PgConnection,
        instance_id: i64,
        age_s: u64,
    ) -> QueryResult<usize> {
        diesel::sql_query(
            "INSERT INTO instance_usage (instance_id, notebook_active_at)
                 VALUES ($1, now() - make_interval(secs => $2))
             ON CONFLICT (instance_id) DO UPDATE SET notebook_active_at =
                 GREATEST(instance_usage.notebook_active_at, EXCLUDED.notebook_active_at)",
        )
        .bind::<diesel::sql_types::BigInt, _>(instance_id)
        .bind::<diesel::sql_types::Double, _>(age_s as f64)
        .execute(conn)
    }
}
