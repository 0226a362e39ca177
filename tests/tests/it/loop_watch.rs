//! Issue 42, defect 15: the background loops are watched. The real controller runs with a
//! test-only fault that makes its reclaimer panic five seconds after each start; `/healthz`,
//! healthy before, must answer 503 naming the dead loop and why, while reporting the others'
//! last ticks.

use std::time::{Duration, Instant};

use cohort_e2e::controller::{ControllerProcess, TestController};
use cohort_e2e::ports::PortRange;
use serde_json::Value;

fn loop_named<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["loops"]
        .as_array()
        .and_then(|loops| loops.iter().find(|l| l["name"] == name))
        .unwrap_or_else(|| panic!("/healthz names no loop {name}: {health}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_loop_turns_healthz_unhealthy_naming_it() {
    let t = TestController::new();
    let ports = PortRange::claim();
    let serving = ControllerProcess::start(
        t.db.url(),
        t.state.path(),
        ports.port(0),
        &[("COHORT_TEST_KILL_LOOP", "reclaimer")],
    );
    let http = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let get = || async {
        let res = http
            .get(format!("{}/healthz", serving.url()))
            .send()
            .await
            .expect("/healthz answers");
        let status = res.status().as_u16();
        (status, res.json::<Value>().await.expect("a JSON body"))
    };

    let (first, health) = get().await;
    assert_eq!(first, 200, "healthy at first: {health}");
    for name in ["worker", "queue", "poller", "reclaimer", "page_cache"] {
        assert_eq!(loop_named(&health, name)["state"], "running", "{health}");
    }
    assert!(
        loop_named(&health, "worker")["last_tick"].is_string(),
        "the worker's last tick is shown: {health}"
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let health = loop {
        let (status, health) = get().await;
        if status == 503 {
            break health;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz stayed {status} with the reclaimer dead: {health}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(health["status"], "unhealthy", "{health}");
    let reclaimer = loop_named(&health, "reclaimer");
    assert_eq!(reclaimer["state"], "dead", "{health}");
    assert!(
        reclaimer["problem"]
            .as_str()
            .is_some_and(|p| p.contains("panicked")),
        "the reason is shown: {health}"
    );
    assert_eq!(
        loop_named(&health, "worker")["state"],
        "running",
        "{health}"
    );
}
