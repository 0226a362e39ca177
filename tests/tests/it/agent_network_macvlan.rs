//! An existing macvlan node network, on the real LXD with real ssh: a LAN the test makes (a veth
//! pair, one end the macvlan's parent, the other in a namespace standing in for the LAN's router
//! and its hosts) and the LXD macvlan network an admin would make onto it. Each container is a
//! LAN host at an address from the node's range, configured before its first boot; a LAN host
//! reaches its sshd directly and the container reaches the LAN; the host cannot reach it, so the
//! node's SSH port goes through LXD's classic proxy and still logs in; a full range refuses.

use crate::net_support;

use cohort_e2e::agent::TestAgent;
use cohort_e2e::macvlan::TestMacvlan;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd, TestNetwork};
use net_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_on_a_macvlan_are_lan_hosts_and_ssh_goes_through_the_classic_proxy() {
    let net = TestNetwork::claim();
    let lan = TestMacvlan::on(&net);
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let agent = TestAgent::start_with(&lxd, |c| {
        c.network.mode = cohort_agent::network::NetworkMode::Existing;
        c.network.name = lan.name();
        c.network.subnet = lan.subnet().parse().unwrap();
        c.network.gateway = Some(lan.router());
        c.network.addresses = Some(format!("{}-{}", lan.address(0), lan.address(1)));
    })
    .await;
    let facts = inventory(&agent)
        .await
        .network
        .expect("the macvlan in the inventory");
    assert_eq!(
        (facts.name.as_str(), facts.free_addresses),
        (lan.name().as_str(), 2)
    );

    let key = SshKey::generate();
    let (ann, bob) = futures_util::future::join(
        create(&agent, &student("lan-ann", "ann", &key, ports.port(0))),
        create(&agent, &student("lan-bob", "bob", &key, ports.port(1))),
    )
    .await;
    let mut addresses = vec![ann.address.clone().unwrap(), bob.address.clone().unwrap()];
    addresses.sort();
    assert_eq!(
        addresses,
        [lan.address(0).to_string(), lan.address(1).to_string()],
        "each gets its own address from the node's range"
    );
    let nic = &ann.devices["cohort-net"];
    assert_eq!(nic.get("network"), Some(&lan.name()));
    assert!(
        !nic.contains_key("ipv4.address"),
        "LXD has no address key on a macvlan NIC"
    );

    // A LAN host logs in to the container's own address, port 22.
    let host = lan.host();
    let ann_address = ann.address.clone().unwrap();
    let out = key.run_in(
        &host.name,
        &ann_address,
        22,
        "ann",
        "whoami; ip -4 route show default",
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("ann\n") && text.contains(&format!("default via {}", lan.router())),
        "direct login from the LAN: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The node's SSH port: the classic proxy (the host cannot reach a macvlan's children).
    assert!(ann.ssh_ready && bob.ssh_ready);
    let ssh = &ann.devices["cohort-ssh"];
    assert!(ssh.get("nat").is_none(), "NAT on a macvlan: {ssh:?}");
    assert_eq!(
        ssh.get("connect").map(String::as_str),
        Some("tcp:127.0.0.1:22")
    );
    let out = key.run("127.0.0.1", ports.port(1), "bob", "whoami");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "bob\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(forkproxies_on(ports.port(1)), 1);

    // The container reaches the LAN (a web server on the router's address), and so does the
    // host from its own LAN address on the parent; the host never reaches the container.
    let web = WebServer::start(&host, ports.port(5));
    let (ok, body) = python_in(&lxd, "lan-ann", &fetch_script(&web.url, 5));
    assert!(
        ok && body == "rows: 42\n",
        "the container did not reach the LAN: {body}"
    );
    let router = lan.router().to_string();
    let (reached, detail) = python_on_host(&connect_script(&router, ports.port(5)));
    assert!(reached, "the host does not reach the LAN: {detail}");
    let (reached, detail) = python_on_host(&connect_script(&ann_address, 22));
    assert!(!reached, "the host reached a macvlan child: {detail}");

    // The range is full: a third student is refused, and nothing is left half-made.
    let resp = agent
        .controller()
        .post(agent.url("/v1/instances"))
        .json(&student("lan-cy", "cy", &key, ports.port(2)))
        .send()
        .await
        .expect("POST /v1/instances");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert!(
        !status.is_success() && text.contains("no free address"),
        "{status} {text}"
    );
    assert!(!lxd.instance_names().contains(&"lan-cy".to_string()));
}

/// Runs python3 code on the host; (success, output).
fn python_on_host(code: &str) -> (bool, String) {
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .output()
        .expect("python3");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}
