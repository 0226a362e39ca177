//! An existing macvlan network onto the campus LAN: each container a host of its own on the LAN,
//! at an address from the range the campus gave the node. The host cannot reach a macvlan's
//! children (the kernel never delivers between a macvlan's parent and its children), so a DNAT
//! rule on the host has nowhere to send to, and nothing the host's netfilter sees passes between
//! a child and the LAN: there SSH goes through LXD's classic proxy (it connects inside the
//! container, whatever its network), and the LAN's own switches and firewalls are what keep
//! containers apart.

use super::{NetworkConfig, NetworkError, NetworkKind, NodeNetwork};

/// A macvlan network the admin made: the LAN's subnet, router and DNS, and the range the
/// campus gave the node, all from the config (LXD knows none of them for a macvlan).
pub(super) fn setup(config: &NetworkConfig, name: String) -> Result<NodeNetwork, NetworkError> {
    let needs = |what: &str| NetworkError::Unsupported {
        name: name.clone(),
        why: format!("a macvlan network needs network.{what} in the agent's config"),
    };
    let gateway = config
        .gateway
        .ok_or_else(|| needs("gateway (the LAN's router)"))?;
    let text = config
        .addresses
        .as_deref()
        .ok_or_else(|| needs("addresses (the LAN addresses given to this node, FIRST-LAST)"))?;
    let pool = config.address_range(text)?;
    let subnet = config.subnet.trunc();
    if !subnet.contains(&gateway) {
        return Err(needs(&format!("gateway inside network.subnet {subnet}")));
    }
    Ok(NodeNetwork {
        name,
        kind: NetworkKind::Macvlan,
        subnet,
        gateway,
        dns: config.dns.unwrap_or(gateway),
        dhcp_ranges: Vec::new(),
        pool: Some(pool),
        // No NAT forward listens on it (the classic proxy listens where the controller says),
        // but the inventory names it, and it is never given to a container: the node's own
        // address on the LAN, where it is in the range.
        ssh_address: config
            .ssh_address
            .or_else(super::host::default_route_address)
            .unwrap_or(gateway),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::Ipv4Addr;

    use super::super::{nic_address, NetworkMode, DEVICE_NIC};
    use super::*;

    #[test]
    fn a_macvlan_nic_has_only_what_lxd_allows_and_ssh_goes_through_the_classic_proxy() {
        let config: NetworkConfig = toml::from_str(
            "mode = \"existing\"\nname = \"campus\"\nsubnet = \"192.168.50.0/24\"\n\
             gateway = \"192.168.50.1\"\naddresses = \"192.168.50.100-192.168.50.101\"",
        )
        .unwrap();
        let n = setup(&config, "campus".into()).unwrap();
        assert_eq!(n.dns, n.gateway);
        let a: Ipv4Addr = "192.168.50.100".parse().unwrap();
        let nic = n.nic_device(a);
        let keys: Vec<_> = nic.keys().cloned().collect();
        assert_eq!(
            keys,
            ["name", "network", "type"],
            "LXD refuses any other key"
        );
        assert!(!n.nat_ssh());
        assert_eq!(n.forward_to(Some(a)), None);
        let (key, value) = n.address_config(a).unwrap();
        let config = BTreeMap::from([(key.to_string(), value)]);
        let devices = BTreeMap::from([(DEVICE_NIC.to_string(), BTreeMap::new())]);
        assert_eq!(nic_address(&config, &devices), Some(a));
        assert_eq!(
            nic_address(&config, &BTreeMap::new()),
            None,
            "no NIC, no address"
        );
        let missing = NetworkConfig {
            gateway: None,
            ..config_without_gateway()
        };
        assert!(setup(&missing, "campus".into())
            .unwrap_err()
            .to_string()
            .contains("network.gateway"));
    }

    fn config_without_gateway() -> NetworkConfig {
        NetworkConfig {
            mode: NetworkMode::Existing,
            addresses: Some("10.161.16.5-10.161.16.9".into()),
            ..Default::default()
        }
    }
}
