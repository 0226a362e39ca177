//! Issue 43: the hourly GPU-time rows are pruned by the existing pruner past
//! `COHORT_GPU_USAGE_RETENTION_DAYS` (default 400), a department's year kept; they outlive their
//! instance (no foreign key), so a report still covers deleted containers.

use cohort_e2e::controller::TestController;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::sql_types::BigInt;

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hourly_gpu_time_past_its_retention_is_pruned_the_rest_kept() {
    let t = TestController::new();
    assert_eq!(t.ctl.config.database.gpu_usage_retention_days, 400);
    let mut conn = t.conn();
    conn.batch_execute(
        "INSERT INTO gpu_usage_hours (instance_id, hour, instance_name, owner_id, username, \
             node_name, allocated_s, busy_s) VALUES \
           (1, date_trunc('hour', now() - interval '401 days'), 'gone-1', 7, 'kim', 'n1', 3600, 10), \
           (1, date_trunc('hour', now() - interval '399 days'), 'gone-1', 7, 'kim', 'n1', 3600, 20), \
           (2, date_trunc('hour', now()), 'gone-2', 7, 'kim', 'n1', 60, 30);",
    )
    .expect("old and recent rows of instances that no longer exist");
    let pruned = cohort_controller::app::prune::prune_once(&t.ctl)
        .await
        .expect("prune");
    assert_eq!(pruned.gpu_usage_hours, 1);
    let left: Count =
        diesel::sql_query("SELECT count(*) AS n FROM gpu_usage_hours WHERE busy_s IN (20, 30)")
            .get_result(&mut conn)
            .expect("count");
    assert_eq!(left.n, 2);
    let all: Count = diesel::sql_query("SELECT count(*) AS n FROM gpu_usage_hours")
        .get_result(&mut conn)
        .expect("count");
    assert_eq!(all.n, 2, "only the row past 400 days went");
    // An hour that is not on the hour is refused: rows are hourly.
    let odd = conn.batch_execute(
        "INSERT INTO gpu_usage_hours (instance_id, hour, instance_name, owner_id, username, \
             node_name) VALUES (3, date_trunc('hour', now()) + interval '1 minute', 'x', 7, 'kim', 'n1')",
    );
    assert!(odd.is_err(), "a row off the hour");
}
