//! The `[network]` section of the agent's config: which LXD network the containers go on, and
//! the host address NAT SSH forwards listen on.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

/// How the node's network is had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// A NAT bridge the agent makes in LXD when it is absent (`name`, `subnet`).
    Managed,
    /// A network the admin made in LXD (`name`): a bridge (its subnet is LXD's `ipv4.address`)
    /// or a macvlan onto a LAN interface (`subnet`, `gateway` and `addresses` are the LAN's).
    Existing,
    /// No NIC in any container; SSH through LXD's classic proxy (one forkproxy each).
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// `managed`, `existing` or `none`. Default `managed`.
    #[serde(default = "default_mode")]
    pub mode: NetworkMode,
    /// The LXD network (and, for a bridge, the host interface). Default `cohort0`.
    #[serde(default = "default_name")]
    pub name: String,
    /// The managed bridge's subnet; its first address is the bridge's own (gateway and DNS).
    /// Default `10.161.16.0/22`: 1021 containers, in a part of 10/8 that campus networks,
    /// Docker (172.17/16 and up), Kubernetes (10.96/12, 10.244/16), k3s (10.42/16, 10.43/16)
    /// and libvirt (192.168.122/24) leave alone. For an existing macvlan network: the LAN's
    /// subnet. Ignored for an existing bridge.
    #[serde(default = "default_subnet")]
    pub subnet: Ipv4Net,
    /// Host address NAT SSH forwards listen on when the controller names none (`0.0.0.0`) or a
    /// loopback address (NAT cannot listen there). Default: the address of the interface that
    /// holds the host's default route, else the bridge's own address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_address: Option<Ipv4Addr>,
    /// Existing macvlan network only: the LAN's router, the containers' default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Ipv4Addr>,
    /// Existing macvlan network only: the LAN's DNS server. Default: `gateway`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Ipv4Addr>,
    /// Existing macvlan network only: the LAN addresses the campus gave this node's containers,
    /// `FIRST-LAST` inside `subnet` (no DHCP server of LXD's hands them out on a macvlan).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<String>,
}

fn default_mode() -> NetworkMode {
    NetworkMode::Managed
}
fn default_name() -> String {
    "cohort0".into()
}
fn default_subnet() -> Ipv4Net {
    "10.161.16.0/22".parse().expect("valid default subnet")
}

impl Default for NetworkConfig {
    fn default() -> Self {
        NetworkConfig {
            mode: default_mode(),
            name: default_name(),
            subnet: default_subnet(),
            ssh_address: None,
            gateway: None,
            dns: None,
            addresses: None,
        }
    }
}

/// Why a `[network]` value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum NetworkConfigError {
    /// the mode is not one of the three
    #[error("network mode {0:?} is not managed, existing or none")]
    Mode(String),
    /// the subnet is too small or not a private range
    #[error("network subnet {subnet}: {why}")]
    Subnet { subnet: Ipv4Net, why: &'static str },
    /// the macvlan address range is missing, malformed or outside the subnet
    #[error("network addresses {0}")]
    Addresses(String),
    /// the name is not a valid interface name
    #[error("network name {0:?} must be 1-15 characters of a-z, 0-9, '-' and '_'")]
    Name(String),
}

impl std::str::FromStr for NetworkMode {
    type Err = NetworkConfigError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "managed" => Ok(NetworkMode::Managed),
            "existing" => Ok(NetworkMode::Existing),
            "none" => Ok(NetworkMode::None),
            other => Err(NetworkConfigError::Mode(other.into())),
        }
    }
}

impl NetworkConfig {
    /// Refuses what LXD or the kernel would refuse later, with the field named.
    pub fn check(&self) -> Result<(), NetworkConfigError> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 15
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if !name_ok {
            return Err(NetworkConfigError::Name(self.name.clone()));
        }
        if self.mode == NetworkMode::Managed {
            let subnet = self.subnet.trunc();
            if subnet.prefix_len() > 29 {
                return Err(NetworkConfigError::Subnet {
                    subnet,
                    why: "too small (at most /29)",
                });
            }
            if !subnet.network().is_private() {
                return Err(NetworkConfigError::Subnet {
                    subnet,
                    why: "not a private (RFC 1918) range",
                });
            }
        }
        if let Some(text) = &self.addresses {
            self.address_range(text)?;
        }
        Ok(())
    }

    /// The macvlan pool, `FIRST-LAST` inside `subnet`.
    pub fn address_range(&self, text: &str) -> Result<(Ipv4Addr, Ipv4Addr), NetworkConfigError> {
        let bad = |why: &str| NetworkConfigError::Addresses(format!("{text:?}: {why}"));
        let (first, last) = text
            .split_once('-')
            .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
            .ok_or_else(|| bad("not FIRST-LAST (e.g. 192.168.50.100-192.168.50.199)"))?;
        let subnet = self.subnet.trunc();
        if first > last {
            return Err(bad("FIRST is after LAST"));
        }
        if !subnet.contains(&first) || !subnet.contains(&last) {
            return Err(bad(&format!("not inside network.subnet {subnet}")));
        }
        Ok((first, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_a_managed_bridge_on_a_quiet_private_22() {
        let c = NetworkConfig::default();
        assert_eq!(c.mode, NetworkMode::Managed);
        assert_eq!(c.name, "cohort0");
        assert_eq!(c.subnet.to_string(), "10.161.16.0/22");
        assert!(c.check().is_ok());
        let back: NetworkConfig = toml::from_str("").unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn bad_names_modes_and_subnets_are_refused() {
        let mut c = NetworkConfig {
            name: "a-name-too-long-for-linux".into(),
            ..Default::default()
        };
        assert!(c.check().unwrap_err().to_string().contains("1-15"));
        c.name = "br0".into();
        c.subnet = "8.8.8.0/24".parse().unwrap();
        assert!(c.check().unwrap_err().to_string().contains("private"));
        c.subnet = "10.0.0.0/30".parse().unwrap();
        assert!(c.check().unwrap_err().to_string().contains("too small"));
        c.mode = NetworkMode::Existing;
        assert!(
            c.check().is_ok(),
            "the subnet is LXD's for an existing network"
        );
        assert!("bridge".parse::<NetworkMode>().is_err());
        assert_eq!("none".parse::<NetworkMode>().unwrap(), NetworkMode::None);
        assert!(toml::from_str::<NetworkConfig>("mode = \"bridge\"").is_err());
    }

    #[test]
    fn a_macvlan_pool_must_be_a_range_inside_the_lan_subnet() {
        let c: NetworkConfig = toml::from_str(
            "mode = \"existing\"\nname = \"campus\"\nsubnet = \"192.168.50.0/24\"\n\
             gateway = \"192.168.50.1\"\naddresses = \"192.168.50.100-192.168.50.199\"",
        )
        .unwrap();
        assert!(c.check().is_ok());
        assert_eq!(
            c.address_range("192.168.50.100-192.168.50.199").unwrap(),
            (
                "192.168.50.100".parse().unwrap(),
                "192.168.50.199".parse().unwrap()
            )
        );
        for bad in [
            "192.168.50.100",
            "192.168.50.199-192.168.50.100",
            "192.168.50.100-192.168.51.5",
        ] {
            let c = NetworkConfig {
                addresses: Some(bad.into()),
                ..c.clone()
            };
            assert!(c.check().is_err(), "{bad}");
        }
    }
}
