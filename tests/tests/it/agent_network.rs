//! The node network on the real LXD, with real ssh and real network namespaces: each container
//! on the agent's bridge with its own address, reaching "the internet" (a namespace the test
//! runs an HTTP server in) through the bridge's NAT; SSH through the kernel (no forkproxy);
//! nothing on the host reachable from a container but DHCP/DNS; students apart from each
//! other; a course policy (egress, ssh_from) applied to running containers without a restart.

use crate::net_support;

use std::time::{Duration, Instant};

use cohort_e2e::agent::TestAgent;
use cohort_e2e::lxd::lxc;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd, TestNetwork};
use cohort_proto::agent::{Egress, NetworkPolicy};
use net_support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn students_reach_the_outside_log_in_through_nat_and_reach_nothing_of_the_host_or_each_other()
{
    let mut net = TestNetwork::claim();
    let lxd = TestLxd::new();
    let internet = net.netns();
    let ports = PortRange::claim();
    let web = WebServer::start(&internet, ports.port(10));
    let agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;
    let key = SshKey::generate();
    let gw = net.gateway().to_string();

    // The agent made the bridge; the inventory says so. A /24: 254 hosts less the bridge's own
    // address and the DHCP range (the top eighth, 32).
    let facts = inventory(&agent)
        .await
        .network
        .expect("network in inventory");
    assert_eq!(facts.name, net.name());
    assert_eq!(facts.subnet, net.subnet());
    assert_eq!(facts.gateway, gw);
    assert_eq!(facts.free_addresses, 221);
    let bridge: serde_json::Value =
        serde_json::from_str(&lxc(&["query", &format!("/1.0/networks/{}", net.name())])).unwrap();
    assert_eq!(bridge["config"]["ipv4.nat"], "true");
    assert_eq!(bridge["config"]["ipv6.address"], "none");

    let (alice_port, bob_port) = (ports.port(0), ports.port(1));
    let alice = create(&agent, &student("cs101-alice", "alice", &key, alice_port)).await;
    let bob = create(&agent, &student("ml202-bob", "bob", &key, bob_port)).await;
    let alice_ip = alice.address.clone().expect("alice has an address");
    let bob_ip = bob.address.clone().expect("bob has an address");
    assert_ne!(alice_ip, bob_ip);
    assert_eq!(alice.ssh_listen.as_deref(), Some(gw.as_str()));
    assert!(alice.ssh_ready);
    let nic = &alice.devices["cohort-net"];
    for key in [
        "security.port_isolation",
        "security.mac_filtering",
        "security.ipv4_filtering",
    ] {
        assert_eq!(nic[key], "true", "{key}");
    }
    assert_eq!(alice.devices["cohort-ssh"]["nat"], "true");
    assert_eq!(
        alice.devices["cohort-ssh"]["connect"],
        format!("tcp:{alice_ip}:22")
    );
    assert_eq!(inventory(&agent).await.network.unwrap().free_addresses, 219);

    // SSH through the kernel: the login works, and no forkproxy carries it.
    let out = key.run(
        &gw,
        alice_port,
        "alice",
        "whoami; ip -4 -o addr show eth0 | awk '{print $4}'; cat /etc/resolv.conf; \
         cat /sys/class/net/eth0/address",
    );
    assert!(
        out.status.success(),
        "ssh through NAT failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "alice\n{alice_ip}/24\nnameserver {gw}\n{}\n",
            mac_following(&alice_ip)
        )
    );
    let neighbour = std::process::Command::new("ip")
        .args(["neigh", "show", &alice_ip, "dev", &net.name()])
        .output()
        .expect("ip neigh");
    assert!(
        String::from_utf8_lossy(&neighbour.stdout).contains(&mac_following(&alice_ip)),
        "the host's neighbour entry for {alice_ip}: {}",
        String::from_utf8_lossy(&neighbour.stdout)
    );
    assert_eq!(
        forkproxies_on(alice_port),
        0,
        "a forkproxy carries alice's SSH"
    );
    assert_eq!(forkproxies_on(bob_port), 0, "a forkproxy carries bob's SSH");

    // The outside (the namespace's web server) is reachable through the bridge's NAT.
    let (ok, body) = python_in(&lxd, "cs101-alice", &fetch_script(&web.url, 5));
    assert!(ok, "fetch from the outside failed: {body}");
    assert_eq!(body, "rows: 42\n");

    // Nothing of the host: a service listening on every host address (as the agent's API, or
    // PostgreSQL, might) answers the host but not a container, by the bridge's address or by
    // another of the host's; neither does another student's SSH forward by the host's address,
    // nor another student's container itself.
    let service = std::net::TcpListener::bind(("0.0.0.0", ports.port(20))).expect("bind");
    std::net::TcpStream::connect((net.gateway(), ports.port(20))).expect("the host reaches it");
    for (host, port, what) in [
        (
            gw.clone(),
            ports.port(20),
            "a host service by the bridge's address",
        ),
        (
            internet.host.to_string(),
            ports.port(20),
            "a host service by another host address",
        ),
        (
            gw.clone(),
            alice_port,
            "alice's SSH forward by the host's address",
        ),
        (alice_ip.clone(), 22, "alice's container"),
    ] {
        let (ok, text) = python_in(&lxd, "ml202-bob", &connect_script(&host, port));
        assert!(!ok, "bob reached {what} ({host}:{port}): {text}");
    }
    drop(service);
    // DNS from the bridge still answers (dnsmasq: NXDOMAIN for a name that cannot exist).
    let (_, text) = python_in(
        &lxd,
        "ml202-bob",
        "import socket\ntry:\n socket.getaddrinfo('cohort-test.invalid', 80)\nexcept socket.gaierror as e:\n print(e.errno == socket.EAI_NONAME)",
    );
    assert_eq!(text.trim(), "True", "DNS on the bridge did not answer");
    // The host reaches both.
    let out = key.run(&gw, bob_port, "bob", "whoami");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "bob\n");

    // Egress none (an exam): the same fetch fails, without a restart; open again restores it.
    let pid = init_pid(&lxd, "cs101-alice");
    let exam = NetworkPolicy {
        egress: Egress::None,
        ssh_from: Vec::new(),
    };
    set_policy(&agent, "cs101-alice", &exam).await;
    let (ok, body) = python_in(&lxd, "cs101-alice", &fetch_script(&web.url, 3));
    assert!(!ok, "egress none let the fetch through: {body}");
    // SSH in still works: replies are not new connections.
    let out = key.run(&gw, alice_port, "alice", "whoami");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "alice\n");
    // Only the mirror's port: the web server's port passes, and only to it.
    let mirror = NetworkPolicy {
        egress: Egress::Allow(vec![format!("{}/32:{}", internet.address, ports.port(10))]),
        ssh_from: Vec::new(),
    };
    set_policy(&agent, "cs101-alice", &mirror).await;
    let (ok, body) = python_in(&lxd, "cs101-alice", &fetch_script(&web.url, 5));
    assert!(ok, "the allowed destination was refused: {body}");
    set_policy(&agent, "cs101-alice", &NetworkPolicy::default()).await;
    let (ok, body) = python_in(&lxd, "cs101-alice", &fetch_script(&web.url, 5));
    assert!(ok, "open egress did not come back: {body}");
    assert_eq!(
        init_pid(&lxd, "cs101-alice"),
        pid,
        "the container was restarted"
    );

    // A bad policy is a 400 naming the field.
    let resp = agent
        .controller()
        .put(agent.url("/v1/instances/cs101-alice/network-policy"))
        .json(&serde_json::json!({"egress": {"allow": ["10.0.0.0/8", "mirror.example:80"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["field"], "network_policy.egress.allow[1]");

    // Deleting gives the address back.
    let del = agent
        .controller()
        .delete(agent.url("/v1/instances/ml202-bob"))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 204);
    assert_eq!(inventory(&agent).await.network.unwrap().free_addresses, 220);
}

/// `cohort-agent doctor` with the agent's config pointed at `net` (or at no network).
/// The MAC a container at `ip` must have: the agent gives each address its own (`02:c0:` and the
/// address's bytes), so a container made at a deleted one's address does not wait out the host's
/// stale neighbour entry for it.
fn mac_following(ip: &str) -> String {
    let ip: std::net::Ipv4Addr = ip.parse().expect("an IPv4 address");
    let [a, b, c, d] = ip.octets();
    format!("02:c0:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

fn doctor(net: &TestNetwork, mode: &str) -> String {
    let out = std::process::Command::new(cohort_e2e::cluster::agent_binary())
        .arg("doctor")
        .env("COHORT_AGENT_NODE_NAME", "doctor")
        .env("COHORT_AGENT_NETWORK_MODE", mode)
        .env("COHORT_AGENT_NETWORK_NAME", net.name())
        .env("COHORT_AGENT_NETWORK_SUBNET", net.subnet())
        .env("COHORT_AGENT_LXD_SOCKET", cohort_e2e::lxd::socket_path())
        .output()
        .expect("run cohort-agent doctor");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The row of `check` in doctor's table, its cells' wrapped lines joined again.
fn row(table: &str, check: &str) -> String {
    cohort_e2e::agent::doctor_row(table, check)
        .unwrap_or_else(|| panic!("no {check} row in\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_reports_the_network_the_ssh_mode_and_the_firewall() {
    let net = TestNetwork::claim();
    let lxd = TestLxd::new();

    // Before the agent ran: the bridge is still to be made, and nothing guards it yet.
    let table = doctor(&net, "managed");
    assert!(
        row(&table, "node network").contains("is made by the agent"),
        "{table}"
    );
    assert!(row(&table, "SSH mode").contains("nat"), "{table}");
    assert!(row(&table, "firewall").contains("WARN"), "{table}");

    let _agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;
    let table = doctor(&net, "managed");
    let network = row(&table, "node network");
    assert!(
        network.contains("OK") && network.contains(&format!("{}/24", net.gateway())),
        "{table}"
    );
    let firewall = row(&table, "firewall");
    assert!(
        firewall.contains("OK") && firewall.contains("inet cohort"),
        "{table}"
    );

    // A node without a network says it runs one forkproxy per container.
    let table = doctor(&net, "none");
    let ssh = row(&table, "SSH mode");
    assert!(ssh.contains("WARN") && ssh.contains("forkproxy"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containers_on_two_node_networks_of_one_host_cannot_reach_each_other() {
    let (net_a, net_b) = (TestNetwork::claim(), TestNetwork::claim());
    let (lxd_a, lxd_b) = (TestLxd::new(), TestLxd::new());
    let agent_a = TestAgent::start_with(&lxd_a, |c| net_a.configure(c)).await;
    let agent_b = TestAgent::start_with(&lxd_b, |c| net_b.configure(c)).await;
    let key = SshKey::generate();
    let mut a = student("os301-ann", "ann", &key, 1);
    a.ssh = None;
    let mut b = student("db401-ben", "ben", &key, 1);
    b.ssh = None;
    let ann = create(&agent_a, &a).await;
    let ben = create(&agent_b, &b).await;
    let (ann_ip, ben_ip) = (ann.address.unwrap(), ben.address.unwrap());

    // The host reaches both containers' sshd; neither container reaches the other's.
    for ip in [&ann_ip, &ben_ip] {
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect_timeout(
            &format!("{ip}:22").parse().unwrap(),
            Duration::from_secs(1),
        )
        .is_err()
        {
            assert!(Instant::now() < deadline, "the host never reached {ip}:22");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let (ok, text) = python_in(&lxd_a, "os301-ann", &connect_script(&ben_ip, 22));
    assert!(!ok, "ann reached ben on the other bridge: {text}");
    let (ok, text) = python_in(&lxd_b, "db401-ben", &connect_script(&ann_ip, 22));
    assert!(!ok, "ben reached ann on the other bridge: {text}");
}
