//! GPU time per instance and hour (`gpu_usage_hours`, issue 43): the poller's additions, the
//! usage report's grouped sums, and the pruner's deletes. Rows carry copies of their instance's,
//! course's, owner's and node's names, so a report still covers containers deleted since.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Double, Integer, Nullable, Text, Timestamptz};

/// An instance on a node as accounting names it.
#[derive(Debug, Clone, QueryableByName)]
pub struct Accountable {
    #[diesel(sql_type = BigInt)]
    pub id: i64,
    #[diesel(sql_type = Text)]
    pub name: String,
    #[diesel(sql_type = Nullable<BigInt>)]
    pub course_id: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    pub course_code: Option<String>,
    #[diesel(sql_type = BigInt)]
    pub owner_id: i64,
    #[diesel(sql_type = Text)]
    pub username: String,
}

/// The instances placed on node `node_id`, with their course and owner.
pub fn accountable_on(conn: &mut PgConnection, node_id: i64) -> QueryResult<Vec<Accountable>> {
    diesel::sql_query(
        "SELECT i.id, i.name, i.course_id, c.code AS course_code, i.owner_id, u.username \
         FROM instances i JOIN users u ON u.id = i.owner_id \
         LEFT JOIN courses c ON c.id = i.course_id WHERE i.node_id = $1",
    )
    .bind::<BigInt, _>(node_id)
    .load(conn)
}

#[derive(QueryableByName)]
struct Heartbeat {
    #[diesel(sql_type = Nullable<Timestamptz>)]
    at: Option<DateTime<Utc>>,
}

/// The node's last heartbeat, its row locked for the transaction: the poll about to record the
/// next one accounts for the time between, and two controllers polling the same node each
/// account only the time since the other's poll.
pub fn last_heartbeat_locked(
    conn: &mut PgConnection,
    node_id: i64,
) -> QueryResult<Option<DateTime<Utc>>> {
    let rows: Vec<Heartbeat> = diesel::sql_query(
        "SELECT last_heartbeat_at AS at FROM nodes WHERE id = $1 FOR NO KEY UPDATE",
    )
    .bind::<BigInt, _>(node_id)
    .load(conn)?;
    Ok(rows.into_iter().next().and_then(|r| r.at))
}

/// Adds `allocated_s` and `busy_s` to instance `who`'s row of `hour` (made when missing).
pub fn add(
    conn: &mut PgConnection,
    who: &Accountable,
    node_name: &str,
    hour: DateTime<Utc>,
    allocated_s: f64,
    busy_s: f64,
) -> QueryResult<()> {
    diesel::sql_query(
        "INSERT INTO gpu_usage_hours (instance_id, hour, instance_name, course_id, course_code, \
             owner_id, username, node_name, allocated_s, busy_s) \
         VALUES ($1, date_trunc('hour', $2::timestamptz), $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (instance_id, hour) DO UPDATE SET \
             allocated_s = gpu_usage_hours.allocated_s + EXCLUDED.allocated_s, \
             busy_s = gpu_usage_hours.busy_s + EXCLUDED.busy_s, \
             node_name = EXCLUDED.node_name, updated_at = now()",
    )
    .bind::<BigInt, _>(who.id)
    .bind::<Timestamptz, _>(hour)
    .bind::<Text, _>(&who.name)
    .bind::<Nullable<BigInt>, _>(who.course_id)
    .bind::<Nullable<Text>, _>(&who.course_code)
    .bind::<BigInt, _>(who.owner_id)
    .bind::<Text, _>(&who.username)
    .bind::<Text, _>(node_name)
    .bind::<Double, _>(allocated_s.max(0.0))
    .bind::<Double, _>(busy_s.max(0.0))
    .execute(conn)
    .map(drop)
}

/// How a report groups its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Student,
    Course,
    Node,
    Day,
}

impl GroupBy {
    /// The SQL of the group's key (fixed text, never the caller's).
    fn key_sql(self) -> &'static str {
        match self {
            GroupBy::Student => "username",
            GroupBy::Course => "COALESCE(course_code, '')",
            GroupBy::Node => "node_name",
            GroupBy::Day => "to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD')",
        }
    }
}

/// What a report covers; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub course: Option<String>,
    pub user: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// `None`: everything (an admin); else only rows owned by `owner` or of `courses`.
    pub scope: Option<(i64, Vec<i64>)>,
}

/// One group's sums.
#[derive(Debug, Clone, QueryableByName)]
pub struct Sum {
    #[diesel(sql_type = Text)]
    pub key: String,
    #[diesel(sql_type = Double)]
    pub allocated_s: f64,
    #[diesel(sql_type = Double)]
    pub busy_s: f64,
}

/// The sums of the rows `filter` selects, grouped `by`, in key order.
pub fn report(conn: &mut PgConnection, filter: &Filter, by: GroupBy) -> QueryResult<Vec<Sum>> {
    let (all, owner, courses) = match &filter.scope {
        None => (true, 0, Vec::new()),
        Some((owner, courses)) => (false, *owner, courses.clone()),
    };
    diesel::sql_query(format!(
        "SELECT {key} AS key, sum(allocated_s)::float8 AS allocated_s, \
                sum(busy_s)::float8 AS busy_s \
         FROM gpu_usage_hours \
         WHERE ($1::text IS NULL OR course_code = $1) AND ($2::text IS NULL OR username = $2) \
           AND ($3::timestamptz IS NULL OR hour >= date_trunc('hour', $3::timestamptz)) \
           AND ($4::timestamptz IS NULL OR hour < $4) \
           AND ($5 OR owner_id = $6 OR course_id = ANY($7)) \
         GROUP BY 1 ORDER BY 1",
        key = by.key_sql()
    ))
    .bind::<Nullable<Text>, _>(&filter.course)
    .bind::<Nullable<Text>, _>(&filter.user)
    .bind::<Nullable<Timestamptz>, _>(filter.since)
    .bind::<Nullable<Timestamptz>, _>(filter.until)
    .bind::<Bool, _>(all)
    .bind::<BigInt, _>(owner)
    .bind::<Array<BigInt>, _>(courses)
    .load(conn)
}

/// Deletes at most `batch` hourly rows older than `days` days; how many.
pub fn prune(conn: &mut PgConnection, days: u32, batch: i64) -> QueryResult<usize> {
    diesel::sql_query(
        "DELETE FROM gpu_usage_hours WHERE (instance_id, hour) IN (\
             SELECT instance_id, hour FROM gpu_usage_hours \
             WHERE hour < now() - make_interval(days => $1) ORDER BY hour LIMIT $2)",
    )
    .bind::<Integer, _>(days.min(i32::MAX as u32) as i32)
    .bind::<BigInt, _>(batch)
    .execute(conn)
}
