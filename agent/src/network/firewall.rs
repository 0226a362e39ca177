//! The agent's own nftables table, `inet cohort`: what LXD 5.0.2's bridge cannot express.
//!
//! LXD's bridge rules accept DNS and DHCP from the containers and leave everything else open:
//! a container reaches every service on the host (the agent's API, PostgreSQL, the controller)
//! through the bridge's address or any other of the host's, and another student's SSH forward
//! through the host's address, since the DNAT happens on the host and routes the packet back
//! out of the bridge, where port isolation (a bridge-port flag) never sees it. Network ACLs
//! would need LXD's nftables driver and still leave the DNAT path open.
//!
//! So per bridge the table holds two chains, rebuilt whole in one `nft -f` transaction from
//! what the agent knows (its network and its containers' policies) at start and on each change:
//! - `guard.<bridge>` (prerouting, before LXD's DNAT): from the bridge, only replies, DHCP and
//!   DNS to the bridge's own address reach the host; anything else addressed to the host is
//!   dropped, forwarded ports included.
//! - `fwd.<bridge>` (forward): nothing from the bridge back into it (container to container
//!   through the host) or into the subnets of the host's other LXD bridges (containers that are
//!   not the course's), then each container's course policy: new connections out only where
//!   its `egress` allows, and new SSH connections in only from its `ssh_from`. Nothing routed
//!   through the host reaches a container's JupyterLab port: only the node itself (the agent's
//!   tunnel, `api::tunnel`) connects to it.
//!
//! A drop in any base chain is final, so LXD's own accepts on the same hooks cannot undo these.

use std::net::Ipv4Addr;
use std::process::Stdio;

use ipnet::Ipv4Net;
use tokio::io::AsyncWriteExt;

use super::NodeNetwork;

/// JupyterLab's port in a Jupyter image (the agent's tunnel connects to it from the host).
const JUPYTER_PORT: u16 = 8888;

/// The table's family and name.
pub const TABLE: &str = "inet cohort";

/// What one container may do, from its course's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRules {
    pub address: Ipv4Addr,
    pub egress: Egress,
    /// Sources allowed to open SSH connections; empty: anywhere.
    pub ssh_from: Vec<Ipv4Net>,
}

/// Where new connections from a container may go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egress {
    Open,
    None,
    /// Only these destinations, each with an optional TCP/UDP port.
    Allow(Vec<(Ipv4Net, Option<u16>)>),
}

impl Egress {
    /// Whether a container under this policy may ask the bridge's DNS (at `gateway`): `open`
    /// may; `none` may not; an allow-list only where it names that address, on port 53 or on
    /// every port.
    pub fn allows_bridge_dns(&self, gateway: Ipv4Addr) -> bool {
        match self {
            Egress::Open => true,
            Egress::None => false,
            Egress::Allow(rules) => rules
                .iter()
                .any(|(net, port)| net.contains(&gateway) && matches!(port, None | Some(53))),
        }
    }
}

/// Why the table could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FirewallError {
    /// `nft` could not be run
    #[error("cannot run nft (install nftables): {0}")]
    Spawn(std::io::Error),
    /// `nft` refused the ruleset
    #[error("nft refused the ruleset: {0}")]
    Refused(String),
}

fn guard_chain(bridge: &str) -> String {
    format!("guard.{bridge}")
}
fn forward_chain(bridge: &str) -> String {
    format!("fwd.{bridge}")
}

/// The whole ruleset for `network`'s bridge, as one `nft -f` script; `neighbours` are the
/// subnets of the host's other LXD bridges.
pub fn script(
    network: &NodeNetwork,
    neighbours: &[Ipv4Net],
    containers: &[ContainerRules],
) -> String {
    let br = &network.name;
    let gw = network.gateway;
    let guard = guard_chain(br);
    let fwd = forward_chain(br);
    let mut s = format!("table {TABLE} {{}}\n");
    s += &format!(
        "add chain {TABLE} {guard} {{ type filter hook prerouting priority -150; policy accept; }}\n\
         flush chain {TABLE} {guard}\n\
         add rule {TABLE} {guard} iifname \"{br}\" ct state established,related accept\n"
    );
    // DNS through the bridge is a way out too (its dnsmasq forwards upstream, so a name can carry
    // data): a container whose policy is not `open` asks it nothing, unless its allow-list names
    // the bridge's DNS itself.
    for c in containers {
        if !c.egress.allows_bridge_dns(gw) {
            let a = c.address;
            s += &format!(
                "add rule {TABLE} {guard} iifname \"{br}\" ip saddr {a} ip daddr {gw} udp dport 53 drop\n\
                 add rule {TABLE} {guard} iifname \"{br}\" ip saddr {a} ip daddr {gw} tcp dport 53 drop\n"
            );
        }
    }
    s += &format!(
        "add rule {TABLE} {guard} iifname \"{br}\" ip daddr {gw} udp dport {{ 53, 67 }} accept\n\
         add rule {TABLE} {guard} iifname \"{br}\" ip daddr {gw} tcp dport 53 accept\n\
         add rule {TABLE} {guard} iifname \"{br}\" fib daddr type local drop\n"
    );
    s += &format!(
        "add chain {TABLE} {fwd} {{ type filter hook forward priority -10; policy accept; }}\n\
         flush chain {TABLE} {fwd}\n\
         add rule {TABLE} {fwd} iifname \"{br}\" oifname \"{br}\" drop\n\
         add rule {TABLE} {fwd} oifname \"{br}\" tcp dport {JUPYTER_PORT} drop\n"
    );
    if !neighbours.is_empty() {
        let nets: Vec<String> = neighbours.iter().map(Ipv4Net::to_string).collect();
        s += &format!(
            "add rule {TABLE} {fwd} iifname \"{br}\" ip daddr {{ {} }} drop\n",
            nets.join(", ")
        );
    }
    for c in containers {
        let a = c.address;
        match &c.egress {
            Egress::Open => {}
            Egress::None => {
                s += &format!(
                    "add rule {TABLE} {fwd} iifname \"{br}\" ip saddr {a} ct state new drop\n"
                );
            }
            Egress::Allow(rules) => {
                for (net, port) in rules {
                    let new = format!("iifname \"{br}\" ip saddr {a} ip daddr {net} ct state new");
                    match port {
                        None => s += &format!("add rule {TABLE} {fwd} {new} accept\n"),
                        Some(p) => {
                            s += &format!("add rule {TABLE} {fwd} {new} tcp dport {p} accept\n");
                            s += &format!("add rule {TABLE} {fwd} {new} udp dport {p} accept\n");
                        }
                    }
                }
                s += &format!(
                    "add rule {TABLE} {fwd} iifname \"{br}\" ip saddr {a} ct state new drop\n"
                );
            }
        }
        if !c.ssh_from.is_empty() {
            let from: Vec<String> = c.ssh_from.iter().map(Ipv4Net::to_string).collect();
            s += &format!(
                "add rule {TABLE} {fwd} oifname \"{br}\" ip daddr {a} tcp dport 22 ct state new \
                 ip saddr != {{ {} }} drop\n",
                from.join(", ")
            );
        }
    }
    s
}

/// The script that takes `bridge`'s chains out of the table (whether or not they are there).
pub fn removal_script(bridge: &str) -> String {
    let mut s = format!("table {TABLE} {{}}\n");
    for (chain, hook) in [
        (guard_chain(bridge), "prerouting priority -150"),
        (forward_chain(bridge), "forward priority -10"),
    ] {
        s += &format!(
            "add chain {TABLE} {chain} {{ type filter hook {hook}; policy accept; }}\n\
             flush chain {TABLE} {chain}\n\
             delete chain {TABLE} {chain}\n"
        );
    }
    s
}

/// Runs `nft -f -` with `script`: all of it or nothing.
pub async fn apply(script: &str) -> Result<(), FirewallError> {
    let mut child = tokio::process::Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(FirewallError::Spawn)?;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    stdin
        .write_all(script.as_bytes())
        .await
        .map_err(FirewallError::Spawn)?;
    drop(stdin);
    let out = child
        .wait_with_output()
        .await
        .map_err(FirewallError::Spawn)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(FirewallError::Refused(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Whether `bridge`'s chains are in the kernel now (for `doctor`).
pub fn installed(bridge: &str) -> bool {
    std::process::Command::new("nft")
        .args(["list", "chain", "inet", "cohort", &guard_chain(bridge)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net() -> NodeNetwork {
        NodeNetwork {
            name: "cohort0".into(),
            kind: super::super::NetworkKind::Bridge,
            subnet: "10.9.0.0/24".parse().unwrap(),
            gateway: "10.9.0.1".parse().unwrap(),
            dns: "10.9.0.1".parse().unwrap(),
            pool: None,
            dhcp_ranges: Vec::new(),
            ssh_address: "10.9.0.1".parse().unwrap(),
        }
    }

    #[test]
    fn nothing_routed_through_the_host_reaches_jupyterlab() {
        let s = script(&net(), &[], &[]);
        assert!(
            s.contains("add rule inet cohort fwd.cohort0 oifname \"cohort0\" tcp dport 8888 drop"),
            "{s}"
        );
    }

    #[test]
    fn the_host_is_closed_to_the_bridge_but_dhcp_and_dns() {
        let s = script(&net(), &[], &[]);
        assert!(s.contains("hook prerouting priority -150"));
        let guard: Vec<&str> = s
            .lines()
            .filter(|l| l.contains("guard.cohort0 iifname"))
            .collect();
        assert_eq!(guard.len(), 4, "{s}");
        assert!(guard[0].ends_with("ct state established,related accept"));
        assert!(guard[1].contains("ip daddr 10.9.0.1 udp dport { 53, 67 } accept"));
        assert!(guard[3].ends_with("fib daddr type local drop"));
        assert!(s.contains("fwd.cohort0 iifname \"cohort0\" oifname \"cohort0\" drop"));
    }

    #[test]
    fn only_an_open_policy_or_an_allow_list_naming_it_asks_the_bridges_dns() {
        let rules = |egress| ContainerRules {
            address: "10.9.0.2".parse().unwrap(),
            egress,
            ssh_from: Vec::new(),
        };
        let drops = |c: ContainerRules| {
            let s = script(&net(), &[], &[c]);
            let dropped: Vec<String> = s
                .lines()
                .filter(|l| {
                    l.contains("ip saddr 10.9.0.2 ip daddr 10.9.0.1") && l.ends_with("drop")
                })
                .map(String::from)
                .collect();
            // The drops come before the bridge's DNS is accepted for everyone.
            let accept = s
                .lines()
                .position(|l| l.contains("udp dport { 53, 67 } accept"));
            let lines: Vec<&str> = s.lines().collect();
            let last_drop = lines.iter().rposition(|l| l.contains("dport 53 drop"));
            if let (Some(a), Some(d)) = (accept, last_drop) {
                assert!(d < a, "{s}");
            }
            dropped.len()
        };
        assert_eq!(drops(rules(Egress::None)), 2);
        assert_eq!(drops(rules(Egress::Open)), 0);
        let elsewhere = vec![("198.51.100.0/24".parse().unwrap(), Some(443))];
        assert_eq!(drops(rules(Egress::Allow(elsewhere))), 2);
        let dns = vec![("10.9.0.1/32".parse().unwrap(), Some(53))];
        assert_eq!(drops(rules(Egress::Allow(dns))), 0);
    }

    #[test]
    fn each_policy_becomes_rules_on_the_containers_address() {
        let rules = [
            ContainerRules {
                address: "10.9.0.2".parse().unwrap(),
                egress: Egress::None,
                ssh_from: vec!["192.0.2.0/24".parse().unwrap()],
            },
            ContainerRules {
                address: "10.9.0.3".parse().unwrap(),
                egress: Egress::Allow(vec![("198.51.100.0/24".parse().unwrap(), Some(443))]),
                ssh_from: Vec::new(),
            },
            ContainerRules {
                address: "10.9.0.4".parse().unwrap(),
                egress: Egress::Open,
                ssh_from: Vec::new(),
            },
        ];
        let s = script(&net(), &["10.7.0.0/24".parse().unwrap()], &rules);
        assert!(s.contains("fwd.cohort0 iifname \"cohort0\" ip daddr { 10.7.0.0/24 } drop"));
        assert!(s.contains("ip saddr 10.9.0.2 ct state new drop"));
        assert!(s.contains(
            "oifname \"cohort0\" ip daddr 10.9.0.2 tcp dport 22 ct state new ip saddr != { 192.0.2.0/24 } drop"
        ));
        assert!(s.contains(
            "ip saddr 10.9.0.3 ip daddr 198.51.100.0/24 ct state new tcp dport 443 accept"
        ));
        assert!(s.contains("ip saddr 10.9.0.3 ct state new drop"));
        assert!(!s.contains("10.9.0.4"), "open and anywhere add nothing");
    }
}
