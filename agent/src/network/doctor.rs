//! `cohort-agent doctor`'s rows for the network: the node network, the SSH mode it gives
//! (`nat` through the kernel, or the `forkproxy` fallback) and the firewall (LXD's driver, `nft`,
//! the agent's table). Read-only: a managed bridge that is missing is made by `serve`, not here.

use crate::config::AgentConfig;
use crate::doctor::{check, Check, Level};
use crate::lxd::server::ServerEnvironment;
use crate::lxd::Lxd;

use super::{firewall, NetworkMode};

/// What doctor found of the network: whether SSH goes through NAT.
fn network_check(
    config: &AgentConfig,
    found: Result<Option<crate::lxd::networks::LxdNetwork>, String>,
    firewall_driver: &str,
) -> (Check, bool) {
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
            false,
        );
    }
    match found {
        Err(e) => (
            check(NAME, Level::Fail, e, "start LXD (scripts/setup)"),
            false,
        ),
        Ok(None) if net.mode == NetworkMode::Existing => (
            check(
                NAME,
                Level::Fail,
                format!("LXD has no network {:?}", net.name),
                format!("lxc network create {} or set network.mode = \"managed\"", net.name),
            ),
            false,
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
            false,
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
            true,
        ),
        Ok(Some(n)) if n.kind != "bridge" || !n.managed => (
            check(
                NAME,
                Level::Fail,
                format!(
                    "{} is a {} network{}: only bridges LXD manages are supported",
                    n.name,
                    n.kind,
                    if n.managed { "" } else { " LXD does not manage" }
                ),
                "name a bridge made with lxc network create, or use mode managed",
            ),
            false,
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
                true,
            ),
            _ => (
                check(
                    NAME,
                    Level::Fail,
                    format!("bridge {} has no IPv4 subnet", n.name),
                    format!("lxc network set {} ipv4.address=10.161.16.1/22", n.name),
                ),
                false,
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
    let (network, nat) = network_check(config, found, &env.firewall);
    let ssh = if nat {
        check(
            "SSH mode",
            Level::Ok,
            "nat: a DNAT rule per container (proxy nat=true), no process, the client's address reaches sshd",
            "",
        )
    } else {
        check(
            "SSH mode",
            Level::Warn,
            "forkproxy: LXD's classic proxy, one lxd forkproxy process (about 19.6 MiB) per container",
            "give the node a network (see node network)",
        )
    };
    let bridge = config.network.name.clone();
    let has_nft = crate::gpu::find_on_path("nft").is_some();
    let installed = nat
        && has_nft
        && tokio::task::spawn_blocking(move || firewall::installed(&bridge))
            .await
            .unwrap_or(false);
    vec![
        network,
        ssh,
        firewall_check(&env.firewall, has_nft, nat, installed),
    ]
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
        let (c, nat) = network_check(&config, Ok(None), "nftables");
        assert!(nat && c.level == Level::Ok, "{c:?}");
        let (c, nat) = network_check(&config, Ok(None), "");
        assert!(!nat && c.level == Level::Fail && c.fix.contains("restart LXD"));
        config.network.mode = NetworkMode::None;
        let (c, nat) = network_check(&config, Ok(None), "nftables");
        assert!(!nat && c.level == Level::Warn);
        config.network.mode = NetworkMode::Existing;
        let (c, nat) = network_check(&config, Ok(None), "nftables");
        assert!(!nat && c.level == Level::Fail);
        let macvlan: crate::lxd::networks::LxdNetwork = serde_json::from_value(
            serde_json::json!({"name": "cohort0", "type": "macvlan", "managed": true}),
        )
        .unwrap();
        let (c, nat) = network_check(&config, Ok(Some(macvlan)), "nftables");
        assert!(!nat && c.level == Level::Fail && c.detail.contains("macvlan"));
    }
}
