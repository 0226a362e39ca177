//! The node network's setup against a scripted daemon: a failure of the daemon itself is tried
//! again before the node falls back (seen in a full suite run on Incus: one agent of many came
//! up NIC-less and its whole class had no address); a refusal is not.

use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::json;

use super::{Network, NetworkConfig, NetworkMode};
use crate::lxd::scripted::{daemon, error, sync};

fn managed() -> NetworkConfig {
    NetworkConfig {
        mode: NetworkMode::Managed,
        name: "ctn9".into(),
        subnet: "10.250.9.0/24".parse().unwrap(),
        ssh_address: Some(Ipv4Addr::new(10, 250, 9, 1)),
        ..NetworkConfig::default()
    }
}

fn bridge() -> (u16, serde_json::Value) {
    sync(json!({
        "name": "ctn9", "type": "bridge", "managed": true,
        "config": {"ipv4.address": "10.250.9.1/24", "ipv4.nat": "true"}
    }))
}

const GET: &str = "GET /1.0/networks/ctn9 HTTP/1.1";
const POST: &str = "POST /1.0/networks HTTP/1.1";
const DNSMASQ: &str = "Failed starting: The DNS and DHCP service exited prematurely: \
                       dnsmasq: failed to create listening socket for 10.250.9.1: Address in use";

#[tokio::test]
async fn a_bridge_the_daemon_failed_to_make_is_made_on_the_next_try() {
    let (lxd, script, dir) = daemon(vec![
        error(404, "Network not found"),
        error(500, DNSMASQ),
        error(404, "Network not found"),
        sync(json!({})),
        bridge(),
    ])
    .await;
    let pauses = [Duration::ZERO; 4];
    let network = Network::connect_with(lxd, dir.path().join("unix.socket"), &managed(), &pauses)
        .await
        .expect("the config is right");
    assert_eq!(network.problem, None);
    let current = network.current.expect("a node network");
    assert_eq!(current.gateway, Ipv4Addr::new(10, 250, 9, 1));
    assert_eq!(*script.asked.lock().unwrap(), [GET, POST, GET, POST, GET]);
}

/// Connects through the scripted daemon answering `answers`, pausing `pauses` zero-length
/// pauses; the node falls back with a problem saying `says`. Returns the requests it got.
async fn falls_back(
    answers: Vec<(u16, serde_json::Value)>,
    pauses: usize,
    says: &str,
) -> Vec<String> {
    let (lxd, script, dir) = daemon(answers).await;
    let pauses = vec![Duration::ZERO; pauses];
    let network = Network::connect_with(lxd, dir.path().join("unix.socket"), &managed(), &pauses)
        .await
        .expect("the config is right");
    assert!(network.current.is_none());
    let problem = network.problem.unwrap_or_default();
    assert!(problem.contains(says), "{problem}");
    let asked = script.asked.lock().unwrap().clone();
    asked
}

#[tokio::test]
async fn a_refusal_is_not_tried_again_and_a_daemon_that_keeps_failing_leaves_the_fallback() {
    let refused = error(
        400,
        "Invalid option for network \"ctn9\" option \"bridge.mtu\"",
    );
    let asked = falls_back(
        vec![error(404, "Network not found"), refused],
        4,
        "Invalid option",
    )
    .await;
    assert_eq!(asked, [GET, POST]);

    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.extend([error(404, "Network not found"), error(500, DNSMASQ)]);
    }
    let asked = falls_back(answers, 2, "Address in use").await;
    assert_eq!(asked.len(), 6, "three tries in all");
}
