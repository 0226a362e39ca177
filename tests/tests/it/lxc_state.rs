//! Issue 46: `lxc list` and `lxc info` through Cohort show an instance's IPv4 addresses, state
//! and usage as the node's LXD gives them (the instance `state` object, read live through the
//! agent), on a node whose containers have the node network's addresses.

use crate::cli_support::{eth0_address, Lxc, OneNode};
use cohort_e2e::TestNetwork;

/// The IPv4 addresses of `eth0` in a state object.
fn ipv4s(state: &serde_json::Value) -> Vec<String> {
    state["network"]["eth0"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["family"] == "inet")
        .filter_map(|a| a["address"].as_str().map(String::from))
        .collect()
}

#[test]
fn lxc_list_shows_addresses_state_and_usage_from_the_node() {
    let net = TestNetwork::claim();
    let node = OneNode::start_with_lxd_api_on(&net);
    let lxc = Lxc::trusted_by(&node.cli, "state", None);
    lxc.ok(&[
        "launch",
        "lab:cohort/base",
        "lab:web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    // The address the node's LXD reports once the container has it.
    let address = eth0_address(&node.lxd, "web1");
    assert_eq!(
        lxc.ok(&["list", "lab:", "-c", "n4s", "-f", "csv"]),
        format!("web1,{address} (eth0),RUNNING\n")
    );
    let listed: serde_json::Value =
        serde_json::from_str(&lxc.ok(&["list", "lab:", "-f", "json"])).expect("JSON");
    let state = &listed[0]["state"];
    assert_eq!(ipv4s(state), vec![address.clone()], "{state}");
    assert_eq!(state["status"], "Running", "{state}");
    assert!(state["memory"]["usage"].as_u64() > Some(0), "{state}");
    assert!(state["processes"].as_i64() > Some(0), "{state}");
    let (one, status) = lxc.curl(
        node.controller
            .lxd_address
            .as_deref()
            .expect("LXD-style API"),
        "/1.0/instances/web1/state",
    );
    assert_eq!(status, 200, "{one}");
    assert_eq!(ipv4s(&one["metadata"]), vec![address.clone()], "{one}");
    let info = lxc.ok(&["info", "lab:web1"]);
    assert!(info.contains(&address), "{info}");
    assert!(info.contains("Memory usage:"), "{info}");
    // Stopped: LXD's status, no address.
    lxc.ok(&["stop", "lab:web1"]);
    assert_eq!(
        lxc.ok(&["list", "lab:", "-c", "n4s", "-f", "csv"]),
        "web1,,STOPPED\n"
    );
    lxc.ok(&["delete", "lab:web1"]);
}
