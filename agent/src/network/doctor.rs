//! `cohort-agent doctor`'s rows for the network: the node network, the SSH mode it gives
//! (`nat` through the kernel, or the `forkproxy` fallback, which a macvlan needs too) and the
//! firewall (LXD's driver, `nft`, the agent's table). Read-only: a managed bridge that is
//! missing is made by `serve`, not here.

use crate::config::AgentConfig;
use crate::doctor::{check, Check, Level};
use crate::lxd::server::ServerEnvironment;
use crate::lxd::Lxd;

use super::{firewall, NetworkMode};

/// How students' SSH reaches the containers, from what doctor found of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SshPath {
    /// A DNAT rule per container on the bridge.
    Nat,
    /// LXD's classic proxy, the node having no usable network.
    Forkproxy,
    /// LXD's classic proxy, because the host cannot reach a macvlan's children.
    Macvlan,
}

/// The row for an existing macvlan network: usable, with what it gives up.
fn macvlan_check(config: &AgentConfig, n: &crate::lxd::networks::LxdNetwork) -> Check {
    let net = &config.network;
    let parent = n.config.get("parent").map_or("?", String::as_str);
    match (net.gateway, net.addresses.as_deref()) {
        (Some(gateway), Some(range)) if net.address_range(range).is_ok() => check(
            "node network",
            Level::Warn,
            format!(
                "macvlan {} onto {parent}: containers are LAN hosts at {range} (gateway {gateway}); \
                 the host cannot reach them, so SSH goes through forkproxy, and the node cannot \
                 enforce isolation between containers or a course's egress and ssh_from: the \
                 LAN's switches and firewalls must",
                n.name
            ),
            "use a bridge (mode managed) where the node must keep students apart",
        ),
        _ => check(
            "node network",
            Level::Fail,
            format!(
                "macvlan {} onto {parent} needs network.subnet, network.gateway and \
                 network.addresses (FIRST-LAST inside the subnet) in the agent's config",
                n.name
            ),
            "add the LAN's subnet, router and the address range the campus gave this node",
        ),
    }
}

/// What doctor found of the network: how SSH reaches the containers.
fn network_check(
    config: &AgentConfig,
    found: Result<Option<crate::lxd::networks::LxdNetwork>, String>,
    firewall_driver: &str,
) -> (Check, SshPath) {
    const NAME: &str = "node network";
    let net = &config.network;
    if net.mode == NetworkMode::None {
        return (
            check(
                NAME,
                Level::Warn,
                "network.mode = none: containers have no network (no pip, no git clone)",
                "set network.mode = \"managed\" (the default) in agent.toml",
            ),
            SshPath::Forkproxy,
        );
    }
    match found {
        Err(e) => (
            check(NAME, Level::Fail, e, "start LXD (scripts/setup)"),
            SshPath::Forkproxy,
        ),
        Ok(None) if net.mode == NetworkMode::Existing => (
            check(
                NAME,
                Level::Fail,
                format!("LXD has no network {:?}", net.name),
                format!("lxc network create {} or set network.mode = \"managed\"", net.name),
            ),
            SshPath::Forkproxy,
        ),
        Ok(None) if firewall_driver.is_empty() => (
            check(
                NAME,
                Level::Fail,
                format!(
                    "bridge {} is missing and LXD cannot make it: it found no firewall tool when it started",
                    net.name
                ),
                "install dnsmasq-base and nftables, then restart LXD (scripts/setup does both)",
            ),
            SshPath::Forkproxy,
        ),
        Ok(None) => (
            check(
                NAME,
                Level::Ok,
                format!(
                    "bridge {} on {} is made by the agent when it starts",
                    net.name, net.subnet
                ),
                "",
            ),
            SshPath::Nat,
        ),
        Ok(Some(n))
            if n.kind == "macvlan" && n.managed && net.mode == NetworkMode::Existing =>
        {
            let row = macvlan_check(config, &n);
            let path = if row.level == Level::Fail {
                SshPath::Forkproxy
            } else {
                SshPath::Macvlan
            };
            (row, path)
        }
        Ok(Some(n)) if n.kind != "bridge" || !n.managed => (
            check(
                NAME,
                Level::Fail,
                format!(
                    "{} is a {} network{}: only bridges and macvlans LXD manages are supported",
                    n.name,
                    n.kind,
                    if n.managed { "" } else { " LXD does not manage" }
                ),
                "name a bridge made with lxc network create, or use mode managed",
            ),
            SshPath::Forkproxy,
        ),
        Ok(Some(n)) => match n.config.get("ipv4.address") {
            Some(a) if a.parse::<ipnet::Ipv4Net>().is_ok() => (
                check(
                    NAME,
                    Level::Ok,
                    format!(
                        "bridge {} on {a} (NAT {})",
                        n.name,
                        n.config.get("ipv4.nat").map_or("off", String::as_str)
                    ),
                    "",
                ),
                SshPath::Nat,
            ),
            _ => (
                check(
                    NAME,
                    Level::Fail,
                    format!("bridge {} has no IPv4 subnet", n.name),
                    format!("lxc network set {} ipv4.address=10.161.16.1/22", n.name),
                ),
                SshPath::Forkproxy,
            ),
        },
    }
}

/// The three rows.
pub async fn checks(config: &AgentConfig, lxd: &Lxd, env: &ServerEnvironment) -> Vec<Check> {
    let found = lxd
        .network(&config.network.name)
        .await
        .map_err(|e| e.to_string());
    let (network, path) = network_check(config, found, &env.firewall);
    let nat = path == SshPath::Nat;
    let ssh = match path {
        SshPath::Nat => check(
            "SSH mode",
            Level::Ok,
            "nat: a DNAT rule per container (proxy nat=true), no process, the client's address reaches sshd",
            "",
        ),
        SshPath::Forkproxy => check(
            "SSH mode",
            Level::Warn,
            "forkproxy: LXD's classic proxy, one lxd forkproxy process (about 19.6 MiB) per container",
            "give the node a network (see node network)",
        ),
        SshPath::Macvlan => check(
            "SSH mode",
            Level::Warn,
            "forkproxy on the node's ports (a DNAT rule cannot reach a macvlan's children from the host), one lxd forkproxy (about 19.6 MiB) per container; on the LAN each container also answers on its own address, port 22",
            "",
        ),
    };
    let bridge = config.network.name.clone();
    let has_nft = crate::gpu::find_on_path("nft").is_some();
    let installed = nat
        && has_nft
        && tokio::task::spawn_blocking(move || firewall::installed(&bridge))
            .await
            .unwrap_or(false);
    let firewall = if path == SshPath::Macvlan {
        check(
            "firewall",
            Level::Warn,
            "the agent's table inet cohort has nothing to guard on a macvlan: containers reach \
             the host only through the LAN, like any LAN host",
            "",
        )
    } else {
        firewall_check(&env.firewall, has_nft, nat, installed)
    };
    vec![network, ssh, firewall]
}

/// LXD's firewall driver, `nft`, and the agent's table for the bridge.
pub fn firewall_check(driver: &str, has_nft: bool, nat: bool, installed: bool) -> Check {
    const NAME: &str = "firewall";
    if driver.is_empty() {
        return check(
            NAME,
            Level::Fail,
            "LXD runs without a firewall driver: it started before nftables or iptables was installed, and cannot make or NAT a bridge",
            "install nftables, then restart LXD (scripts/setup does both)",
        );
    }
    if !has_nft {
        return check(
            NAME,
            Level::Fail,
            format!("LXD uses {driver}, but nft is not on PATH: the agent cannot keep containers off the host"),
            "install nftables",
        );
    }
    match (nat, installed) {
        (false, _) => check(NAME, Level::Ok, format!("LXD uses {driver}; no node network to guard"), ""),
        (true, true) => check(
            NAME,
            Level::Ok,
            format!("LXD uses {driver}; the agent's table inet cohort guards the bridge (host closed but DHCP/DNS, no container to container, course policies)"),
            "",
        ),
        (true, false) => check(
            NAME,
            Level::Warn,
            format!("LXD uses {driver}; the agent's table inet cohort has no rules for the bridge yet: containers can reach the host"),
            "start the agent (cohort-agent serve), which writes the table; see its log if it did",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_firewall_driver_lxd_must_be_restarted() {
        let c = firewall_check("", true, true, false);
        assert_eq!(c.level, Level::Fail);
        assert!(c.fix.contains("restart LXD"));
        assert_eq!(
            firewall_check("nftables", false, true, false).level,
            Level::Fail
        );
        assert_eq!(
            firewall_check("nftables", true, true, false).level,
            Level::Warn
        );
        assert_eq!(
            firewall_check("nftables", true, true, true).level,
            Level::Ok
        );
        assert_eq!(
            firewall_check("xtables", true, false, false).level,
            Level::Ok
        );
    }

    #[test]
    fn the_ssh_mode_follows_the_network() {
        let mut config = AgentConfig::new("n");
        let (c, path) = network_check(&config, Ok(None), "nftables");
        assert!(path == SshPath::Nat && c.level == Level::Ok, "{c:?}");
        let (c, path) = network_check(&config, Ok(None), "");
        assert!(
            path == SshPath::Forkproxy && c.level == Level::Fail && c.fix.contains("restart LXD")
        );
        config.network.mode = NetworkMode::None;
        let (c, path) = network_check(&config, Ok(None), "nftables");
        assert!(path == SshPath::Forkproxy && c.level == Level::Warn);
        config.network.mode = NetworkMode::Existing;
        let (c, path) = network_check(&config, Ok(None), "nftables");
        assert!(path == SshPath::Forkproxy && c.level == Level::Fail);
        let macvlan: crate::lxd::networks::LxdNetwork = serde_json::from_value(
            serde_json::json!({"name": "cohort0", "type": "macvlan", "managed": true,
                               "config": {"parent": "eno1"}}),
        )
        .unwrap();
        // Without the LAN's router and range: unusable.
        let (c, path) = network_check(&config, Ok(Some(macvlan.clone())), "nftables");
        assert!(
            path == SshPath::Forkproxy
                && c.level == Level::Fail
                && c.detail.contains("network.gateway")
        );
        config.network.subnet = "192.168.50.0/24".parse().unwrap();
        config.network.gateway = Some("192.168.50.1".parse().unwrap());
        config.network.addresses = Some("192.168.50.100-192.168.50.199".into());
        let (c, path) = network_check(&config, Ok(Some(macvlan)), "nftables");
        assert_eq!(path, SshPath::Macvlan);
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.detail.contains("onto eno1") && c.detail.contains("cannot reach them"),
            "{c:?}"
        );
        let unmanaged: crate::lxd::networks::LxdNetwork = serde_json::from_value(
            serde_json::json!({"name": "cohort0", "type": "macvlan", "managed": false}),
        )
        .unwrap();
        let (c, path) = network_check(&config, Ok(Some(unmanaged)), "nftables");
        assert!(path == SshPath::Forkproxy && c.level == Level::Fail);
    }
}
