//! Issue 26, node identity over time, with real processes and certificates of 30 seconds' life:
//! the poller renews a node's certificate at two thirds of its life over the node's current
//! mutual-TLS identity, the agent serves the new one without a restart (and after one), the old
//! one is revoked only once the agent is seen serving the new; a renewal cut off after the
//! controller recorded the new certificate leaves the node reachable and is settled on the next
//! poll; and a node that was off past its certificate's expiry comes back with a new join token,
//! its container kept.

use std::path::Path;
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{instance, limits, to_json, CreateInstance};
use cohort_e2e::cluster::Cluster;
use diesel::prelude::*;
use reqwest::Method as M;
use serde_json::Value;

const LIFE_S: &str = "30";

fn fingerprint_of(cert_path: &Path) -> String {
    let pem = std::fs::read(cert_path).expect("agent certificate");
    let der = rustls_pemfile::certs(&mut pem.as_slice())
        .next()
        .expect("a certificate")
        .expect("PEM");
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(&der))
}

#[derive(QueryableByName, Debug, PartialEq)]
struct Pin {
    #[diesel(sql_type = diesel::sql_types::Text)]
    fingerprint: String,
    #[diesel(sql_type = diesel::sql_types::Bool)]
    revoked: bool,
}

fn pins(cluster: &Cluster, node: &str) -> Vec<Pin> {
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    diesel::sql_query(
        "SELECT fingerprint, revoked_at IS NOT NULL AS revoked FROM node_certificates \
         WHERE node_name = $1 ORDER BY id",
    )
    .bind::<diesel::sql_types::Text, _>(node)
    .load(&mut conn)
    .expect("node certificates")
}

fn audited(cluster: &Cluster, action: &str) -> i64 {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    diesel::sql_query("SELECT count(*) AS n FROM audit_log WHERE action = $1")
        .bind::<diesel::sql_types::Text, _>(action)
        .get_result::<Count>(&mut conn)
        .expect("audit rows")
        .n
}

/// Waits (at most `within`) until `check` holds, with the logs in the failure.
async fn until<F, Fut>(cluster: &Cluster, what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "{what} within {within:?}\ncontroller:\n{}\nagent:\n{}",
            cluster.controller_log(),
            cluster.nodes[0].log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_certificates_are_renewed_before_expiry_and_an_expired_node_joins_again() {
    let mut cluster = Cluster::start_with_env(
        1,
        &[
            ("COHORT_NODE_CERT_LIFETIME_S", LIFE_S),
            ("COHORT_POLL_INTERVAL_S", "1"),
            ("COHORT_OFFLINE_AFTER_S", "4"),
            // The node is killed well inside the default 60 s start-up grace, in which the
            // controller marks no node offline; the grace is not what this test is about.
            ("COHORT_STARTUP_GRACE_S", "0"),
        ],
    )
    .await;
    let cert_path = cluster.nodes[0].state_dir.join("agent.crt");
    let first = fingerprint_of(&cert_path);
    let node: Value = cluster.admin(M::GET, "/nodes/node1", None).await;
    let first_expiry = node["certificate_expires_at"]
        .as_str()
        .expect("an expiry")
        .to_string();

    // Renewed at two thirds of 30 s, over the live connection: no restart.
    until(
        &cluster,
        "the agent serves a renewed certificate",
        Duration::from_secs(40),
        || async { fingerprint_of(&cert_path) != first },
    )
    .await;
    let second = fingerprint_of(&cert_path);
    until(
        &cluster,
        "the old certificate is revoked",
        Duration::from_secs(10),
        || async {
            pins(&cluster, "node1")
                == vec![
                    Pin {
                        fingerprint: first.clone(),
                        revoked: true,
                    },
                    Pin {
                        fingerprint: second.clone(),
                        revoked: false,
                    },
                ]
        },
    )
    .await;
    assert!(audited(&cluster, "node_certificate_renewed") >= 1);
    let node: Value = cluster.admin(M::GET, "/nodes/node1", None).await;
    assert_eq!(node["state"], "online", "{node}");
    assert!(
        node["certificate_expires_at"].as_str().unwrap() > first_expiry.as_str(),
        "the expiry moved on: {node} (first {first_expiry})"
    );
    let metrics = cluster.scrape(&cluster.admin_token).await;
    let expiry_line = metrics
        .lines()
        .find(|l| {
            l.starts_with(
                "cohort_controller_node_certificate_expiry_timestamp_seconds{node=\"node1\"}",
            )
        })
        .unwrap_or_else(|| panic!("no expiry metric:\n{metrics}"));
    let at: i64 = expiry_line.rsplit(' ').next().unwrap().parse().unwrap();
    let shown =
        chrono::DateTime::parse_from_rfc3339(node["certificate_expires_at"].as_str().unwrap())
            .unwrap()
            .timestamp();
    assert_eq!(at, shown, "{expiry_line}");

    // A restart serves the renewed pair from disk, and the controller still reaches it.
    cluster.nodes[0].restart();
    assert_eq!(fingerprint_of(&cert_path), second);
    let before = cluster.admin(M::GET, "/nodes/node1", None).await["last_heartbeat_at"].clone();
    until(
        &cluster,
        "a poll after the restart",
        Duration::from_secs(10),
        || async {
            let now = cluster.admin(M::GET, "/nodes/node1", None).await;
            now["last_heartbeat_at"] != before && now["state"] == "online"
        },
    )
    .await;

    // Cut off after the controller recorded a new certificate the agent never got: the node
    // stays reachable on the one it serves, and the stray pin is revoked on the next poll.
    {
        let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
        diesel::sql_query(
            "INSERT INTO node_certificates (node_name, fingerprint, certificate_pem, not_after) \
             VALUES ('node1', $1, 'never delivered', now() + interval '30 seconds')",
        )
        .bind::<diesel::sql_types::Text, _>("ab".repeat(32))
        .execute(&mut conn)
        .expect("a stray pin");
    }
    until(
        &cluster,
        "the stray pin is revoked",
        Duration::from_secs(10),
        || async {
            pins(&cluster, "node1")
                .iter()
                .any(|p| p.fingerprint == "ab".repeat(32) && p.revoked)
        },
    )
    .await;
    assert!(audited(&cluster, "node_certificate_confirmed") >= 1);
    assert_eq!(
        cluster.admin(M::GET, "/nodes/node1", None).await["state"],
        "online"
    );

    // A node off past its certificate's expiry: the controller can no longer pin it.
    let image = cluster.import_base_image("cohort/base").await;
    assert!(image["fingerprint"].is_string(), "{image}");
    let limits = limits(1, 256, 2);
    let op = cluster
        .admin(
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits),
                ..instance("kept", "cohort/base")
            })),
        )
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    cluster.nodes[0].kill();
    cluster
        .wait_node_state("node1", "offline", Duration::from_secs(30))
        .await;
    until(
        &cluster,
        "every certificate of the node expired",
        Duration::from_secs(45),
        || async {
            cluster.admin(M::GET, "/nodes/node1", None).await["certificate_expires_at"].is_null()
        },
    )
    .await;
    cluster.join_again(0).await;
    cluster
        .wait_node_state("node1", "online", Duration::from_secs(30))
        .await;
    let kept: Value = cluster.admin(M::GET, "/instances/kept", None).await;
    assert_eq!(kept["node"], "node1", "{kept}");
    until(
        &cluster,
        "the kept container shows running",
        Duration::from_secs(20),
        || async {
            cluster.admin(M::GET, "/instances/kept", None).await["observed_state"] == "running"
        },
    )
    .await;
    assert_eq!(
        cluster.nodes[0].lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "kept,RUNNING\n"
    );
}
