//! Placement's SQL: the calls of the functions in `placement.sql` beside this file
//! (`cohort_place_try`, `cohort_place_class`), whose definitions the migrations install and
//! `controller_placement`'s test compares with this file. The decisions around them (passes,
//! queueing, reasons) are `crate::placement`'s.

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Jsonb, Nullable, Text, Untyped};

use crate::app::config::PlacementConfig;

/// What is placed: a queued instance (`instance`) or a new row (`row`, its columns by name), and
/// what it needs.
pub struct Ask<'a> {
    pub instance: Option<i64>,
    pub row: Option<serde_json::Value>,
    pub gpu_count: i32,
    pub cpu: i32,
    pub memory_mib: i64,
    /// The root disk and the home volume together.
    pub disk_gib: i64,
    pub gpu_model: Option<&'a str>,
    pub exclusive: bool,
    /// Most containers on one GPU this instance accepts (its course's `--gpu-share N`).
    pub share: Option<i32>,
    pub image_id: i64,
    pub pack: bool,
}

/// What one try did: no node (`placed_node` NULL), a node that could not take the instance once
/// locked (`placed_port` NULL), or the placement.
#[derive(QueryableByName)]
pub struct Try {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub placed_instance: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub placed_node: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub placed_node_name: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    pub placed_port: Option<i32>,
    #[diesel(sql_type = Nullable<Array<BigInt>>)]
    pub placed_gpus: Option<Vec<i64>>,
    #[diesel(sql_type = Nullable<Array<Integer>>)]
    pub placed_slots: Option<Vec<i32>>,
}

/// What `cohort_place_class` says of one row: a try that placed it, and the pass that did; all
/// NULL when no node could hold it now.
#[derive(QueryableByName)]
pub struct ClassTry {
    #[diesel(embed)]
    pub placed: Try,
    #[diesel(sql_type = Nullable<Integer>)]
    pub placed_pass: Option<i32>,
}

/// Places the class `rows` (each a new row, its columns by name), which all ask for `ask`, in
/// one call of `cohort_place_class`: one row per given row, in order.
pub fn place_class(
    conn: &mut PgConnection,
    rows: &[serde_json::Value],
    ask: &Ask<'_>,
    config: &PlacementConfig,
    window: i64,
    tries: i32,
) -> QueryResult<Vec<ClassTry>> {
    diesel::sql_query(
        "SELECT * FROM cohort_place_class($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
         $14, $15)",
    )
    .bind::<Array<Jsonb>, _>(rows)
    .bind::<Integer, _>(ask.gpu_count)
    .bind::<Integer, _>(ask.cpu)
    .bind::<BigInt, _>(ask.memory_mib)
    .bind::<BigInt, _>(ask.disk_gib)
    .bind::<Nullable<Text>, _>(ask.gpu_model)
    .bind::<Bool, _>(ask.exclusive)
    .bind::<BigInt, _>(ask.image_id)
    .bind::<Bool, _>(ask.pack)
    .bind::<Double, _>(config.cpu_overcommit)
    .bind::<Double, _>(config.memory_overcommit)
    .bind::<Double, _>(config.disk_overcommit)
    .bind::<Nullable<Integer>, _>(ask.share)
    .bind::<BigInt, _>(window)
    .bind::<Integer, _>(tries)
    .load(conn)
}

/// One try (`cohort_place_try`) at the best node of `window` (every node when `None`), waiting
/// for its lock when `wait`, skipping the nodes in `tried`.
pub fn place_try(
    conn: &mut PgConnection,
    ask: &Ask<'_>,
    pinned: Option<i64>,
    config: &PlacementConfig,
    window: Option<i64>,
    wait: bool,
    tried: &[i64],
) -> QueryResult<Try> {
    PlaceTry {
        ask,
        pinned,
        config,
        window,
        wait,
        tried,
    }
    .get_result(conn)
}

/// The call of `cohort_place_try`. Its own query type rather than `sql_query`, which diesel never
/// keeps prepared: this one is prepared once per connection, so PostgreSQL neither parses nor
/// plans the call again.
struct PlaceTry<'a> {
    ask: &'a Ask<'a>,
    pinned: Option<i64>,
    config: &'a PlacementConfig,
    window: Option<i64>,
    wait: bool,
    tried: &'a [i64],
}

impl QueryId for PlaceTry<'_> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl Query for PlaceTry<'_> {
    type SqlType = Untyped;
}

impl RunQueryDsl<PgConnection> for PlaceTry<'_> {}

impl QueryFragment<Pg> for PlaceTry<'_> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        let ask = self.ask;
        out.push_sql("SELECT * FROM cohort_place_try(");
        out.push_bind_param::<Nullable<BigInt>, _>(&ask.instance)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<BigInt>, _>(&self.pinned)?;
        out.push_sql(", ");
        out.push_bind_param::<Integer, _>(&ask.gpu_count)?;
        out.push_sql(", ");
        out.push_bind_param::<Integer, _>(&ask.cpu)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&ask.memory_mib)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&ask.disk_gib)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Text>, _>(&ask.gpu_model)?;
        out.push_sql(", ");
        out.push_bind_param::<Bool, _>(&ask.exclusive)?;
        out.push_sql(", ");
        out.push_bind_param::<BigInt, _>(&ask.image_id)?;
        out.push_sql(", ");
        out.push_bind_param::<Bool, _>(&ask.pack)?;
        out.push_sql(", ");
        out.push_bind_param::<Double, _>(&self.config.cpu_overcommit)?;
        out.push_sql(", ");
        out.push_bind_param::<Double, _>(&self.config.memory_overcommit)?;
        out.push_sql(", ");
        out.push_bind_param::<Double, _>(&self.config.disk_overcommit)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<BigInt>, _>(&self.window)?;
        out.push_sql(", ");
        out.push_bind_param::<Bool, _>(&self.wait)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<BigInt>, _>(&self.tried)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Jsonb>, _>(&ask.row)?;
        out.push_sql(", ");
        out.push_bind_param::<Nullable<Integer>, _>(&ask.share)?;
        out.push_sql(")");
        Ok(())
    }
}
