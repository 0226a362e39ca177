//! Issue 24: the per-student instance limit holds under concurrency. Twenty creates sent at once
//! by one student through the real API (a `cohort-controller serve` process) give them at most
//! the limit: the database serialises the count on the owner's row.

use cohort_controller::db::models::image::{Image, NewImage};
use cohort_e2e::bodies::{instance, limits, CreateInstance};
use cohort_e2e::cluster::Cluster;
use diesel::prelude::*;
use reqwest::Method;

/// `STUDENT_MAX_INSTANCES` in the controller's instance actions.
const STUDENT_MAX_INSTANCES: usize = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_concurrent_creates_give_a_student_no_more_than_the_limit() {
    // No node: every instance that gets through waits in the queue, so only the limit decides.
    let cluster = Cluster::start(0).await;
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    Image::insert(
        &mut conn,
        &NewImage {
            fingerprint: &"b".repeat(64),
            alias: "base",
            description: "",
            gpu_ready: false,
            size_bytes: 1,
            created_by: None,
        },
    )
    .expect("image row");
    let alice = cluster.user("alice", "student").await;

    let creates = (0..20).map(|i| {
        let req = cluster
            .request(Method::POST, "/instances", &alice)
            .json(&CreateInstance {
                limits: Some(limits(1, 256, 1)),
                queue: true,
                ..instance(&format!("alice-{i}"), "base")
            });
        async move {
            let res = req.send().await.expect("answer");
            let status = res.status().as_u16();
            (status, res.text().await.unwrap_or_default())
        }
    });
    let answers = futures_util::future::join_all(creates).await;
    let accepted = answers.iter().filter(|(s, _)| *s == 202).count();
    let refused: Vec<_> = answers.iter().filter(|(s, _)| *s != 202).collect();
    assert_eq!(accepted, STUDENT_MAX_INSTANCES, "{answers:?}");
    for (status, body) in &refused {
        assert_eq!(*status, 409, "{body}");
        let err: serde_json::Value = serde_json::from_str(body).expect("an error body");
        assert!(
            err["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("at most 2 instances")),
            "{body}"
        );
    }
    let owned: i64 = diesel::sql_query(
        "SELECT count(*) AS n FROM instances i JOIN users u ON u.id = i.owner_id \
         WHERE u.username = 'alice'",
    )
    .get_result::<Count>(&mut conn)
    .expect("count")
    .n;
    assert_eq!(owned, STUDENT_MAX_INSTANCES as i64, "rows in the database");
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    n: i64,
}
