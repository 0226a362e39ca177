//! SSH and addresses on the node network, on the real LXD with real ssh from real network
//! namespaces: `ssh_from` lets in only its sources (the others' packets never reach the
//! container); a whole class logs in with no forkproxy while a node without a network still
//! works through one; a container made before the network gets its NIC on its next start or
//! re-provision with nothing lost; twenty creates at once get twenty addresses.

use crate::net_support;

use std::time::Duration;

use cohort_e2e::agent::TestAgent;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd, TestNetwork};
use cohort_proto::agent::{Egress, Instance, NetworkPolicy};
use net_support::*;

/// Student `s<i>` of `made` (at port `i` of `ports`) is ready, logs in through NAT at `gw` as
/// themselves, and no forkproxy carries it. sshd answered the agent; a fresh one-CPU container on
/// a loaded node may still take longer than ssh's ConnectTimeout over its first banner, which is
/// no refusal, so a login is tried again while the connection fails.
fn each_logs_in_through_nat(key: &SshKey, gw: &str, ports: &PortRange, made: &[Instance]) {
    for (i, inst) in made.iter().enumerate() {
        let port = ports.port(i as u16);
        assert!(inst.ssh_ready, "{} not ready", inst.name);
        let user = format!("s{i}");
        let out = key.run_when_up(gw, port, &user, "whoami", Duration::from_secs(60));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{user}\n"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            forkproxies_on(port),
            0,
            "{} goes through a forkproxy",
            inst.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssh_from_lets_in_its_sources_and_the_others_never_reach_the_container() {
    let mut net = TestNetwork::claim();
    let lxd = TestLxd::new();
    let inside = net.netns();
    let outside = net.netns();
    let ports = PortRange::claim();
    let agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;
    let key = SshKey::generate();
    let gw = net.gateway().to_string();
    let port = ports.port(0);

    let mut req = student("cs101-carol", "carol", &key, port);
    req.network_policy = Some(NetworkPolicy {
        egress: Egress::Open,
        ssh_from: vec![format!("{}/32", inside.address)],
    });
    let carol = create(&agent, &req).await;
    assert!(carol.ssh_ready);

    // Inside the CIDR: logs in, and NAT kept the client's own address.
    let out = key.run_in(
        &inside.name,
        &gw,
        port,
        "carol",
        "echo $SSH_CLIENT | cut -d' ' -f1",
    );
    assert!(
        out.status.success(),
        "the allowed source was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        inside.address.to_string()
    );

    // Outside: refused before the container, which sees no segment of it.
    let before = tcp_segments_in(&lxd, "cs101-carol");
    let out = key.run_in(&outside.name, &gw, port, "carol", "whoami");
    assert_eq!(out.status.code(), Some(255), "the outside source got in");
    assert!(out.stdout.is_empty());
    assert_eq!(
        tcp_segments_in(&lxd, "cs101-carol"),
        before,
        "a packet of the refused client reached the container"
    );

    // Widened without a restart: the outside source logs in.
    let pid = init_pid(&lxd, "cs101-carol");
    set_policy(
        &agent,
        "cs101-carol",
        &NetworkPolicy {
            egress: Egress::Open,
            ssh_from: vec![
                format!("{}/32", inside.address),
                format!("{}/30", outside.address),
            ],
        },
    )
    .await;
    let out = key.run_in(&outside.name, &gw, port, "carol", "whoami");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "carol\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        init_pid(&lxd, "cs101-carol"),
        pid,
        "the container was restarted"
    );

    // A create that finds the instance applies the policy it carries (a course changed it).
    req.network_policy = Some(NetworkPolicy {
        egress: Egress::Open,
        ssh_from: vec![format!("{}/32", inside.address)],
    });
    create(&agent, &req).await;
    let out = key.run_in(&outside.name, &gw, port, "carol", "whoami");
    assert_eq!(
        out.status.code(),
        Some(255),
        "the re-provisioned policy was not applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_logs_in_with_no_forkproxy_and_a_node_without_a_network_still_works() {
    let net = TestNetwork::claim();
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;
    let key = SshKey::generate();
    let gw = net.gateway().to_string();
    let class: Vec<_> = (0..6u16)
        .map(|i| student(&format!("lab-s{i}"), &format!("s{i}"), &key, ports.port(i)))
        .collect();
    let made = futures_util::future::join_all(class.iter().map(|req| create(&agent, req))).await;
    let mut addresses: Vec<_> = made.iter().map(|i| i.address.clone().unwrap()).collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 6, "two students share an address");
    each_logs_in_through_nat(&key, &gw, &ports, &made);

    // A node without a network (mode none): the classic proxy, one forkproxy, still logs in.
    let plain = TestLxd::new();
    let fallback = TestAgent::start(&plain).await;
    let port = ports.port(10);
    let inst = create(&fallback, &student("lab-old", "old", &key, port)).await;
    assert!(inst.address.is_none());
    assert!(!inst.devices.contains_key("cohort-net"));
    assert_eq!(inst.ssh_listen.as_deref(), Some("127.0.0.1"));
    let out = key.run("127.0.0.1", port, "old", "whoami");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "old\n");
    assert_eq!(forkproxies_on(port), 1, "the fallback has its forkproxy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_made_before_the_network_gets_its_nic_on_start_or_re_provision() {
    let net = TestNetwork::claim();
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let key = SshKey::generate();
    let gw = net.gateway().to_string();
    let (dave, erin) = (
        student("cs101-dave", "dave", &key, ports.port(0)),
        student("cs101-erin", "erin", &key, ports.port(1)),
    );
    {
        let before = TestAgent::start(&lxd).await;
        create(&before, &dave).await;
        create(&before, &erin).await;
        for (name, user, port) in [
            ("dave", "dave", ports.port(0)),
            ("erin", "erin", ports.port(1)),
        ] {
            let out = key.run(
                "127.0.0.1",
                port,
                user,
                &format!("echo {name}-work > notes.txt"),
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        change_state(&before, "cs101-dave", "stop").await;
    }
    let agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;

    // Dave was stopped: his next start gives him a NIC, configured inside before he boots.
    let started = change_state(&agent, "cs101-dave", "start").await;
    assert!(started.address.is_some(), "no NIC on the next start");
    assert_eq!(started.devices["cohort-ssh"]["nat"], "true");
    let out = key.run_when_up(
        &gw,
        ports.port(0),
        "dave",
        "cat notes.txt; ip -4 -o addr show eth0 | wc -l",
        Duration::from_secs(60),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "dave-work\n1\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Erin is running: re-provisioning her (the same create) plugs the NIC in, no restart.
    let pid = init_pid(&lxd, "cs101-erin");
    let again = create(&agent, &erin).await;
    assert!(again.address.is_some(), "no NIC on re-provision");
    assert_eq!(
        init_pid(&lxd, "cs101-erin"),
        pid,
        "re-provision restarted the container"
    );
    let out = key.run(&gw, ports.port(1), "erin", "cat notes.txt");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "erin-work\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        forkproxies_on(ports.port(0)) + forkproxies_on(ports.port(1)),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_creates_at_once_get_twenty_addresses_and_a_deleted_one_comes_back() {
    let net = TestNetwork::claim();
    let lxd = TestLxd::new();
    let agent = TestAgent::start_with(&lxd, |c| net.configure(c)).await;
    let key = SshKey::generate();
    let requests: Vec<_> = (0..20u16)
        .map(|i| {
            let mut req = student(&format!("many-{i}"), "x", &key, 1);
            req.ssh = None;
            req.start = false;
            req
        })
        .collect();
    let made = futures_util::future::join_all(requests.iter().map(|r| create(&agent, r))).await;
    let mut addresses: Vec<std::net::Ipv4Addr> = made
        .iter()
        .map(|i| i.address.as_deref().expect("address").parse().unwrap())
        .collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 20, "two creates got one address");
    let subnet: ipnet_like::Net = net.subnet().parse().unwrap();
    assert!(addresses
        .iter()
        .all(|a| subnet.contains(*a) && *a != net.gateway()));
    assert_eq!(
        inventory(&agent).await.network.unwrap().free_addresses,
        221 - 20
    );

    // Held while the container exists, free once it is deleted, and then handed out again.
    let gone = made[7].address.clone().unwrap();
    let resp = agent
        .controller()
        .delete(agent.url("/v1/instances/many-7"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    assert_eq!(
        inventory(&agent).await.network.unwrap().free_addresses,
        221 - 19
    );
    let mut next = student("many-20", "x", &key, 1);
    next.ssh = None;
    next.start = false;
    let next = create(&agent, &next).await;
    assert_eq!(next.address.as_deref(), Some(gone.as_str()));
}

/// The test's own check of "in the subnet", independent of the agent's.
mod ipnet_like {
    use std::net::Ipv4Addr;

    pub struct Net(u32, u32);

    impl std::str::FromStr for Net {
        type Err = String;
        fn from_str(s: &str) -> Result<Self, String> {
            let (a, p) = s.split_once('/').ok_or("no prefix")?;
            let a: Ipv4Addr = a.parse().map_err(|_| "address")?;
            let p: u32 = p.parse().map_err(|_| "prefix")?;
            let mask = u32::MAX << (32 - p);
            Ok(Net(u32::from(a) & mask, mask))
        }
    }

    impl Net {
        pub fn contains(&self, a: Ipv4Addr) -> bool {
            u32::from(a) & self.1 == self.0
        }
    }
}

/// The node network on Incus (the agent makes its bridge, addresses, NAT forwards and firewall
/// the same way): a small class logs in through NAT with no forkproxy, each at its own address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_class_on_incus_logs_in_through_the_node_network() {
    let net = TestNetwork::claim();
    let incus = TestLxd::on(cohort_e2e::lxd::TestDaemon::Incus);
    let ports = PortRange::claim();
    let agent = TestAgent::start_with(&incus, |c| net.configure(c)).await;
    assert_eq!(agent.node.daemon.kind, cohort_agent::lxd::DaemonKind::Incus);
    assert!(
        agent.node.network.current.is_some(),
        "the agent has no node network on Incus: {:?}",
        agent.node.network.problem
    );
    let key = SshKey::generate();
    let gw = net.gateway().to_string();
    let class: Vec<_> = (0..3u16)
        .map(|i| student(&format!("in-s{i}"), &format!("s{i}"), &key, ports.port(i)))
        .collect();
    let made = futures_util::future::join_all(class.iter().map(|req| create(&agent, req))).await;
    let mut addresses: Vec<_> = made.iter().map(|i| i.address.clone().unwrap()).collect();
    addresses.sort();
    addresses.dedup();
    assert_eq!(addresses.len(), 3, "two students share an address");
    each_logs_in_through_nat(&key, &gw, &ports, &made);
    // The bridge is Incus's; LXD sees it only as a host interface it does not manage.
    let managed = |daemon: cohort_e2e::lxd::TestDaemon| {
        let net: serde_json::Value =
            serde_json::from_str(&daemon.run(&["query", &format!("/1.0/networks/{}", net.name())]))
                .expect("network JSON");
        net["managed"] == true
    };
    assert!(managed(cohort_e2e::lxd::TestDaemon::Incus));
    assert!(!managed(cohort_e2e::lxd::TestDaemon::Lxd));
}
