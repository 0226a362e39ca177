//! The node network: the LXD network every container gets one NIC on (a NAT bridge the agent
//! makes, or a bridge or macvlan the admin made), each container's static address on it (the
//! files that configure it inside are `guest::network`), the SSH forward through the kernel
//! (`proxy` with `nat=true`), and the nftables table that keeps the host out of the containers'
//! reach.
//!
//! A macvlan onto the campus LAN is the exception to the last two: see `macvlan`.

pub mod addresses;
pub mod config;
pub mod doctor;
pub mod firewall;
mod host;
mod macvlan;
pub mod policy;
mod service;
#[cfg(test)]
mod service_tests;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;

pub use config::{NetworkConfig, NetworkConfigError, NetworkMode};
pub use service::Network;

use crate::lxd::{Device, Lxd, LxdError};

/// The instance device of a container's NIC, and its name inside.
pub const DEVICE_NIC: &str = "cohort-net";
pub const GUEST_INTERFACE: &str = "eth0";

/// The instance config key that records a container's address where LXD's NIC cannot (a
/// macvlan NIC has no `ipv4.address`). Under `user.cohort.`, which no user may set.
pub const KEY_ADDRESS: &str = "user.cohort.address";

/// What kind of LXD network the containers are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkKind {
    /// An LXD bridge: the host routes (and NATs) for the containers and guards them.
    Bridge,
    /// An LXD macvlan onto a LAN interface: the containers are LAN hosts the host cannot reach.
    Macvlan,
}

/// The network this node's containers are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNetwork {
    /// The LXD network, which is also the bridge's interface on the host.
    pub name: String,
    pub kind: NetworkKind,
    pub subnet: Ipv4Net,
    /// The bridge's own address (the LAN's router on a macvlan): the containers' gateway.
    pub gateway: Ipv4Addr,
    /// The containers' DNS server: the bridge's dnsmasq, or the LAN's.
    pub dns: Ipv4Addr,
    /// LXD's `ipv4.dhcp.ranges`: never handed to a container as its static address.
    pub dhcp_ranges: Vec<(Ipv4Addr, Ipv4Addr)>,
    /// The only addresses a container may get, where the network is not the node's own (the
    /// range the campus gave a macvlan node); `None`: the whole subnet.
    pub pool: Option<(Ipv4Addr, Ipv4Addr)>,
    /// Where NAT SSH forwards listen when the controller names no concrete address.
    pub ssh_address: Ipv4Addr,
}

/// Why the node network could not be had, or a network request failed.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// LXD failed
    #[error(transparent)]
    Lxd(#[from] LxdError),
    /// the config is unusable
    #[error(transparent)]
    Config(#[from] NetworkConfigError),
    /// mode `existing` names a network LXD does not have
    #[error(
        "LXD has no network {0:?} (network.mode = \"existing\"); create it or use mode \"managed\""
    )]
    Missing(String),
    /// the network is not a bridge LXD manages with an IPv4 subnet
    #[error("LXD network {name:?} cannot carry Cohort's containers: {why}")]
    Unsupported { name: String, why: String },
    /// every address is taken
    #[error("no free address left on network {0}")]
    Full(String),
    /// a reservation could not be written
    #[error("{0}")]
    Reservation(String),
    /// a network policy broke a rule (naming the field)
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
}

impl NodeNetwork {
    /// Finds (or, in `managed` mode, makes) the network; `None` in mode `none`.
    pub async fn setup(lxd: &Lxd, config: &NetworkConfig) -> Result<Option<Self>, NetworkError> {
        config.check()?;
        if config.mode == NetworkMode::None {
            return Ok(None);
        }
        let found = match lxd.network(&config.name).await? {
            Some(n) => n,
            None if config.mode == NetworkMode::Existing => {
                return Err(NetworkError::Missing(config.name.clone()))
            }
            None => {
                let made = lxd
                    .create_bridge(&config.name, &bridge_config(config.subnet))
                    .await;
                match made {
                    Ok(()) => {}
                    // Another agent on this daemon made it meanwhile.
                    Err(e)
                        if e.lxd_message()
                            .is_some_and(|m| m.contains("already exists")) => {}
                    Err(e) => return Err(e.into()),
                }
                lxd.network(&config.name)
                    .await?
                    .ok_or_else(|| NetworkError::Missing(config.name.clone()))?
            }
        };
        let unsupported = |why: &str| NetworkError::Unsupported {
            name: config.name.clone(),
            why: why.to_string(),
        };
        if found.kind == "macvlan" && found.managed && config.mode == NetworkMode::Existing {
            return macvlan::setup(config, found.name).map(Some);
        }
        if found.kind != "bridge" || !found.managed {
            return Err(unsupported(&format!(
                "it is a{} {} network; only bridges and macvlans LXD manages are supported",
                if found.managed { "" } else { "n unmanaged" },
                found.kind
            )));
        }
        let iface: ipnet::Ipv4Net = found
            .config
            .get("ipv4.address")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| unsupported("it has no IPv4 subnet (ipv4.address)"))?;
        if config.mode == NetworkMode::Managed && iface.trunc() != config.subnet.trunc() {
            tracing::warn!(network = %config.name, lxd = %iface, config = %config.subnet,
                "the bridge exists with another subnet than the config's; using LXD's");
        }
        let gateway = iface.addr();
        let ssh_address = config
            .ssh_address
            .or_else(host::default_route_address)
            .unwrap_or(gateway);
        Ok(Some(NodeNetwork {
            name: found.name,
            kind: NetworkKind::Bridge,
            subnet: iface.trunc(),
            gateway,
            dns: gateway,
            pool: None,
            dhcp_ranges: found
                .config
                .get("ipv4.dhcp.ranges")
                .map(|r| addresses::parse_ranges(r))
                .unwrap_or_default(),
            ssh_address,
        }))
    }

    /// The container's NIC: its static address (served by LXD's dnsmasq too), a MAC that follows
    /// the address ([`mac_for`]), isolated from every other port of the bridge, and unable to
    /// send as another MAC or address. LXD has none of these for a macvlan NIC: its address is
    /// recorded under [`KEY_ADDRESS`] instead.
    pub fn nic_device(&self, address: Ipv4Addr) -> Device {
        let mut nic = device([
            ("type", "nic".into()),
            ("network", self.name.clone()),
            ("name", GUEST_INTERFACE.into()),
        ]);
        if self.kind == NetworkKind::Macvlan {
            return nic;
        }
        nic.extend(device([
            ("ipv4.address", address.to_string()),
            ("hwaddr", mac_for(address)),
            ("security.port_isolation", "true".into()),
            ("security.mac_filtering", "true".into()),
            ("security.ipv4_filtering", "true".into()),
        ]));
        nic
    }

    /// Whether SSH forwards go through the kernel to the container's address (a bridge), or
    /// through LXD's classic proxy (a macvlan, whose children the host cannot reach).
    pub fn nat_ssh(&self) -> bool {
        self.kind == NetworkKind::Bridge
    }

    /// The address an SSH forward connects to for a container at `address`: `None` for the
    /// classic proxy.
    pub fn forward_to(&self, address: Option<Ipv4Addr>) -> Option<Ipv4Addr> {
        address.filter(|_| self.nat_ssh())
    }

    /// The instance config that records `address` where the NIC cannot.
    pub fn address_config(&self, address: Ipv4Addr) -> Option<(&'static str, String)> {
        (self.kind == NetworkKind::Macvlan).then(|| (KEY_ADDRESS, address.to_string()))
    }

    /// Where a NAT forward listens for a request that names `requested`: that address when it
    /// is a concrete one, the node's SSH address for a wildcard or loopback one (LXD refuses a
    /// wildcard in NAT mode, and loopback traffic never reaches the DNAT rule).
    pub fn listen_for(&self, requested: &str) -> String {
        match requested.parse::<IpAddr>() {
            Ok(ip) if !ip.is_unspecified() && !ip.is_loopback() => ip.to_string(),
            _ => self.ssh_address.to_string(),
        }
    }
}

/// The SSH proxy device: a DNAT rule to the container's address when it has one (no process,
/// the client's own address reaches sshd), else LXD's classic proxy (one forkproxy).
pub fn ssh_proxy_device(listen: &str, port: u16, container: Option<Ipv4Addr>) -> Device {
    let listen = match listen.parse::<IpAddr>() {
        Ok(IpAddr::V6(v6)) => format!("[{v6}]"),
        _ => listen.to_string(),
    };
    match container {
        Some(address) => device([
            ("type", "proxy".into()),
            ("nat", "true".into()),
            ("listen", format!("tcp:{listen}:{port}")),
            ("connect", format!("tcp:{address}:22")),
        ]),
        None => device([
            ("type", "proxy".into()),
            ("bind", "host".into()),
            ("listen", format!("tcp:{listen}:{port}")),
            ("connect", "tcp:127.0.0.1:22".into()),
        ]),
    }
}

/// A device from its keys.
pub(crate) fn device<const N: usize>(keys: [(&str, String); N]) -> Device {
    keys.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

/// The config of a bridge the agent makes: NAT to the outside, no IPv6, and a DHCP range in the
/// top eighth of the subnet for anything else put on it, so static addresses come from the rest.
pub fn bridge_config(subnet: Ipv4Net) -> BTreeMap<String, String> {
    let subnet = subnet.trunc();
    let gateway = subnet.hosts().next().expect("a /29 or larger has hosts");
    let size = 1u32 << (32 - subnet.prefix_len());
    let last = u32::from(subnet.broadcast()) - 1;
    let first = last + 1 - (size / 8).max(2);
    let mut config = BTreeMap::new();
    config.insert(
        "ipv4.address".to_string(),
        format!("{gateway}/{}", subnet.prefix_len()),
    );
    config.insert("ipv4.nat".into(), "true".into());
    config.insert("ipv6.address".into(), "none".into());
    config.insert(
        "ipv4.dhcp.ranges".into(),
        format!("{}-{}", Ipv4Addr::from(first), Ipv4Addr::from(last)),
    );
    config
}

/// The static address of the agent's NIC in an instance's devices, or recorded in its config
/// (a macvlan NIC).
pub fn nic_address(
    config: &BTreeMap<String, String>,
    devices: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<Ipv4Addr> {
    let nic = devices.get(DEVICE_NIC)?;
    nic.get("ipv4.address")
        .or_else(|| config.get(KEY_ADDRESS))?
        .parse()
        .ok()
}

/// The MAC of the container at `address`: locally administered (`02:c0:`) and the address's four
/// bytes, so a container that gets an address again gets its predecessor's MAC too. With a
/// random MAC the host's neighbour entry for the address still named the deleted container's,
/// and every packet to the new one (the SSH readiness probe, the student's first login) waited
/// out that stale entry: about 5 s of `delay_first_probe_time` and the SYN's retransmits. A
/// class provisioned after another's teardown took 85 s instead of 21 (BENCHMARKS.md).
pub fn mac_for(address: Ipv4Addr) -> String {
    let [a, b, c, d] = address.octets();
    format!("02:c0:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_made_bridge_nats_has_no_ipv6_and_keeps_dhcp_to_the_top_eighth() {
        let c = bridge_config("10.161.16.0/22".parse().unwrap());
        assert_eq!(c["ipv4.address"], "10.161.16.1/22");
        assert_eq!(c["ipv4.nat"], "true");
        assert_eq!(c["ipv6.address"], "none");
        assert_eq!(c["ipv4.dhcp.ranges"], "10.161.19.127-10.161.19.254");
        let small = bridge_config("10.9.0.0/29".parse().unwrap());
        assert_eq!(small["ipv4.dhcp.ranges"], "10.9.0.5-10.9.0.6");
    }

    #[test]
    fn nat_forwards_listen_on_a_concrete_address_and_carry_the_container_address() {
        let n = NodeNetwork {
            name: "cohort0".into(),
            kind: NetworkKind::Bridge,
            subnet: "10.9.0.0/24".parse().unwrap(),
            gateway: "10.9.0.1".parse().unwrap(),
            dns: "10.9.0.1".parse().unwrap(),
            pool: None,
            dhcp_ranges: Vec::new(),
            ssh_address: "192.0.2.7".parse().unwrap(),
        };
        assert_eq!(n.listen_for("0.0.0.0"), "192.0.2.7");
        assert_eq!(n.listen_for("127.0.0.1"), "192.0.2.7");
        assert_eq!(n.listen_for("not an address"), "192.0.2.7");
        assert_eq!(n.listen_for("198.51.100.4"), "198.51.100.4");
        let nat = ssh_proxy_device("192.0.2.7", 2201, Some("10.9.0.2".parse().unwrap()));
        assert_eq!(nat["nat"], "true");
        assert_eq!(nat["listen"], "tcp:192.0.2.7:2201");
        assert_eq!(nat["connect"], "tcp:10.9.0.2:22");
        assert!(!nat.contains_key("bind"));
        let classic = ssh_proxy_device("127.0.0.1", 2201, None);
        assert_eq!(classic["bind"], "host");
        assert_eq!(classic["connect"], "tcp:127.0.0.1:22");
        let nic = n.nic_device("10.9.0.2".parse().unwrap());
        for key in [
            "security.port_isolation",
            "security.mac_filtering",
            "security.ipv4_filtering",
        ] {
            assert_eq!(nic[key], "true", "{key}");
        }
        assert_eq!(nic["network"], "cohort0");
        assert_eq!(nic["ipv4.address"], "10.9.0.2");
        assert_eq!(nic["hwaddr"], "02:c0:0a:09:00:02");
        assert_eq!(
            mac_for("192.168.200.254".parse().unwrap()),
            "02:c0:c0:a8:c8:fe"
        );
        assert!(n.nat_ssh());
        assert_eq!(n.address_config("10.9.0.2".parse().unwrap()), None);
    }
}
