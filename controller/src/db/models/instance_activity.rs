//! `instance_activity`: what a container's node last said of its use besides the GPU and
//! JupyterLab (those are `instance_usage`'s): its terminals' last input and its last busy
//! process. The node reports ages; they are placed on the database's clock here, as every time
//! the reclaimer compares.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Double, Nullable, Text, Timestamptz};

use crate::db::schema::instance_activity;

/// One answer of the node, as recorded.
#[derive(Debug, Clone, Default)]
pub struct Heard {
    /// Seconds since the last terminal input.
    pub tty_input_age_s: Option<u64>,
    /// The busiest process above the threshold (`"cc1 at 97 % of a core"`), when any.
    pub busy_process: Option<String>,
}

#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = instance_activity, check_for_backend(diesel::pg::Pg))]
pub struct InstanceActivity {
    pub instance_id: i64,
    pub tty_input_at: Option<DateTime<Utc>>,
    pub cpu_busy_at: Option<DateTime<Utc>>,
    pub busy_process: Option<String>,
    pub checked_at: DateTime<Utc>,
}

impl InstanceActivity {
    /// Records what the node said of instance `id` (times only move forward).
    pub fn record(conn: &mut PgConnection, id: i64, heard: &Heard) -> QueryResult<()> {
        diesel::sql_query(
            "INSERT INTO instance_activity
                 (instance_id, tty_input_at, cpu_busy_at, busy_process, checked_at)
             VALUES ($1, now() - make_interval(secs => $2),
                     CASE WHEN $3::text IS NULL THEN NULL ELSE now() END, $3, now())
             ON CONFLICT (instance_id) DO UPDATE SET
                 tty_input_at = GREATEST(instance_activity.tty_input_at, EXCLUDED.tty_input_at),
                 cpu_busy_at = COALESCE(EXCLUDED.cpu_busy_at, instance_activity.cpu_busy_at),
                 busy_process = COALESCE(EXCLUDED.busy_process, instance_activity.busy_process),
                 checked_at = now()",
        )
        .bind::<BigInt, _>(id)
        .bind::<Nullable<Double>, _>(heard.tty_input_age_s.map(|s| s as f64))
        .bind::<Nullable<Text>, _>(heard.busy_process.as_deref())
        .execute(conn)
        .map(drop)
    }

    /// When instance `id` was last seen in use by its terminals or processes.
    pub fn in_use_at(conn: &mut PgConnection, id: i64) -> QueryResult<Option<DateTime<Utc>>> {
        instance_activity::table
            .find(id)
            .select(diesel::dsl::sql::<Nullable<Timestamptz>>(
                "GREATEST(tty_input_at, cpu_busy_at)",
            ))
            .first::<Option<DateTime<Utc>>>(conn)
            .optional()
            .map(Option::flatten)
    }

    pub fn of(conn: &mut PgConnection, id: i64) -> QueryResult<Option<InstanceActivity>> {
        instance_activity::table
            .find(id)
            .select(InstanceActivity::as_select())
            .first(conn)
            .optional()
    }
}
