//! Issue 42, defect 6: operations on one instance run in the order they were asked for, and
//! each step re-reads the desired state. A start and a stop sent 10 ms apart to a real
//! container (real controller, agent and LXD) must leave it stopped, every round; the start,
//! overtaken by the stop's desired state, is cancelled with the reason, not run after the stop.

use std::time::Duration;

use cohort_e2e::bodies::{instance, limits, state_change, to_json, CreateInstance, StateAction};
use cohort_e2e::cluster::Cluster;
use reqwest::Method as M;
use serde_json::Value;

const ROUNDS: usize = 4;

async fn ask(cluster: &Cluster, name: &str, action: StateAction) -> String {
    let op = cluster
        .admin(
            M::PUT,
            &format!("/instances/{name}/state"),
            Some(to_json(&state_change(action))),
        )
        .await;
    op["id"].as_str().expect("an operation").to_string()
}

fn lxd_status(cluster: &Cluster, name: &str) -> String {
    cluster.nodes[0]
        .lxd
        .lxc(&["list", "-f", "csv", "-c", "ns"])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name},")).map(str::to_string))
        .unwrap_or_else(|| panic!("{name} is not in LXD"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_then_a_stop_10_ms_later_always_ends_stopped() {
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let name = "ord-one";
    let limits = limits(1, 256, 2);
    let op = cluster
        .admin(
            M::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits),
                start: false,
                ..instance(name, "cohort/base")
            })),
        )
        .await;
    let made = cluster
        .wait_operation(op["id"].as_str().unwrap(), Duration::from_secs(300))
        .await;
    assert_eq!(made["status"], "success", "{made}");

    for round in 0..ROUNDS {
        let start = ask(&cluster, name, StateAction::Start).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let stop = ask(&cluster, name, StateAction::Stop).await;
        let within = Duration::from_secs(120);
        let started: Value = cluster.wait_operation(&start, within).await;
        let stopped: Value = cluster.wait_operation(&stop, within).await;
        assert_eq!(stopped["status"], "success", "round {round}: {stopped}");
        assert!(
            started["status"] == "success"
                || (started["status"] == "cancelled"
                    && started["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("desired state is now stopped"))),
            "round {round}: the start neither ran first nor was cancelled with the reason: \
             {started}"
        );
        assert_eq!(
            lxd_status(&cluster, name),
            "STOPPED",
            "round {round}: the start ran after the stop ({started} then {stopped})"
        );
        let inst = cluster
            .admin(M::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(inst["desired_state"], "stopped", "round {round}: {inst}");
    }
}
