//! Each container's address on the node network, picked by the agent like its idmap range
//! (`idmap`): LXD's own config is the record (every NIC on the network with a static
//! `ipv4.address`, in every project, so nothing survives in the agent but LXD's state), DHCP
//! leases and the DHCP range are avoided, and an address handed to a create still in flight is
//! reserved in a file beside the daemon's lock, where every agent driving the daemon sees it.
//! An address is free again once LXD no longer holds the container.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::NodeNetwork;

/// How long a reservation keeps its address from other creates: far longer than a create
/// takes, so only the reservation of an agent that died mid-create ever lapses.
const RESERVATION_TTL_S: u64 = 600;

/// The addresses NICs on `network` hold in `listing` (LXD's instances, `recursion=1`, every
/// project), from the expanded devices so a NIC a profile gives counts too.
pub fn taken_addresses(listing: &[Value], network: &str) -> BTreeSet<Ipv4Addr> {
    listing
        .iter()
        .filter_map(|inst| {
            inst.get("expanded_devices")
                .or_else(|| inst.get("devices"))?
                .as_object()
        })
        .flat_map(|devices| devices.values())
        .filter(|dev| {
            dev.get("type").and_then(Value::as_str) == Some("nic")
                && (dev.get("network").and_then(Value::as_str) == Some(network)
                    || dev.get("parent").and_then(Value::as_str) == Some(network))
        })
        .filter_map(|dev| dev.get("ipv4.address")?.as_str()?.parse().ok())
        .chain(
            listing
                .iter()
                .filter_map(|inst| recorded_address(inst, network)),
        )
        .collect()
}

/// The address recorded in the config of an instance whose NIC on `network` cannot carry one
/// (a macvlan NIC).
fn recorded_address(inst: &Value, network: &str) -> Option<Ipv4Addr> {
    let on_network = inst
        .get("expanded_devices")
        .or_else(|| inst.get("devices"))?
        .as_object()?
        .values()
        .any(|dev| {
            dev.get("type").and_then(Value::as_str) == Some("nic")
                && dev.get("network").and_then(Value::as_str) == Some(network)
        });
    let config = inst.get("expanded_config").or_else(|| inst.get("config"))?;
    on_network
        .then(|| config.get(super::KEY_ADDRESS)?.as_str()?.parse().ok())
        .flatten()
}

/// Parses LXD's `ipv4.dhcp.ranges` (`a-b,c-d`).
pub fn parse_ranges(text: &str) -> Vec<(Ipv4Addr, Ipv4Addr)> {
    text.split(',')
        .filter_map(|r| {
            let (a, b) = r.trim().split_once('-')?;
            Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
        })
        .collect()
}

impl NodeNetwork {
    /// Every address a container may be given: the subnet's hosts (only the pool's, where there
    /// is one) but the bridge's own, the SSH address and the DHCP ranges.
    pub fn assignable(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        self.subnet.hosts().filter(move |a| {
            self.pool.is_none_or(|(lo, hi)| (lo..=hi).contains(a))
                && *a != self.gateway
                && *a != self.ssh_address
                && !self
                    .dhcp_ranges
                    .iter()
                    .any(|(lo, hi)| (*lo..=*hi).contains(a))
        })
    }

    /// The lowest assignable address not in `taken`.
    pub fn pick(&self, taken: &BTreeSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        self.assignable().find(|a| !taken.contains(a))
    }

    /// How many assignable addresses are not in `taken`.
    pub fn free(&self, taken: &BTreeSet<Ipv4Addr>) -> u32 {
        self.assignable().filter(|a| !taken.contains(a)).count() as u32
    }
}

/// The file of addresses handed to creates in flight, one `NETWORK ADDRESS UNIX_SECONDS` line
/// each, beside the daemon's start lock.
pub(crate) fn reservations_path(lock: &Path) -> PathBuf {
    lock.with_extension("addresses")
}

/// The lock every agent on the daemon takes to pick an address (not the start lock, which a
/// start holds for seconds).
pub(crate) fn lock_path(lock: &Path) -> PathBuf {
    lock.with_extension("addresses.lock")
}

/// The live reservations in `text` at `now`: `(network, address, at)`.
pub(crate) fn live_reservations(text: &str, now: u64) -> Vec<(String, Ipv4Addr, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split(' ');
            let network = parts.next()?.to_string();
            let address = parts.next()?.parse().ok()?;
            let at: u64 = parts.next()?.parse().ok()?;
            (at + RESERVATION_TTL_S > now).then_some((network, address, at))
        })
        .collect()
}

pub(crate) fn write_reservations(
    path: &Path,
    live: &[(String, Ipv4Addr, u64)],
) -> std::io::Result<()> {
    let text: String = live
        .iter()
        .map(|(n, a, at)| format!("{n} {a} {at}\n"))
        .collect();
    let tmp = path.with_extension("addresses.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(tmp, path)
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn net(subnet: &str, ranges: &str) -> NodeNetwork {
        let subnet: ipnet::Ipv4Net = subnet.parse().unwrap();
        let gateway = subnet.hosts().next().unwrap();
        NodeNetwork {
            name: "cohort0".into(),
            kind: super::super::NetworkKind::Bridge,
            subnet,
            gateway,
            dns: gateway,
            pool: None,
            dhcp_ranges: parse_ranges(ranges),
            ssh_address: gateway,
        }
    }

    #[test]
    fn a_macvlan_pool_bounds_the_picks_and_recorded_addresses_are_taken() {
        let mut n = net("192.168.50.0/24", "");
        n.pool = Some((
            "192.168.50.100".parse().unwrap(),
            "192.168.50.101".parse().unwrap(),
        ));
        let listing = vec![
            json!({"devices": {"cohort-net": {"type": "nic", "network": "cohort0"}},
                   "config": {"user.cohort.address": "192.168.50.100"}}),
            // Recorded, but not on this network: not taken here.
            json!({"devices": {"cohort-net": {"type": "nic", "network": "other"}},
                   "config": {"user.cohort.address": "192.168.50.101"}}),
        ];
        let taken = taken_addresses(&listing, "cohort0");
        assert_eq!(taken.len(), 1);
        assert_eq!(n.pick(&taken), Some("192.168.50.101".parse().unwrap()));
        assert_eq!(n.free(&taken), 1);
        let mut all = taken.clone();
        all.insert("192.168.50.101".parse().unwrap());
        assert_eq!(
            n.pick(&all),
            None,
            "nothing outside the pool is ever picked"
        );
    }

    #[test]
    fn the_gateway_the_dhcp_range_and_taken_addresses_are_never_picked() {
        let n = net("10.9.0.0/29", "10.9.0.5-10.9.0.6");
        let all: Vec<_> = n.assignable().map(|a| a.to_string()).collect();
        assert_eq!(all, ["10.9.0.2", "10.9.0.3", "10.9.0.4"]);
        let mut taken = BTreeSet::new();
        assert_eq!(n.pick(&taken), Some("10.9.0.2".parse().unwrap()));
        taken.insert("10.9.0.2".parse().unwrap());
        taken.insert("10.9.0.4".parse().unwrap());
        assert_eq!(n.pick(&taken), Some("10.9.0.3".parse().unwrap()));
        assert_eq!(n.free(&taken), 1);
        taken.insert("10.9.0.3".parse().unwrap());
        assert_eq!(n.pick(&taken), None, "full");
    }

    #[test]
    fn taken_addresses_are_the_nics_on_this_network_only() {
        let listing = vec![
            json!({"expanded_devices": {"eth0": {"type": "nic", "network": "cohort0", "ipv4.address": "10.9.0.2"}}}),
            json!({"expanded_devices": {"eth0": {"type": "nic", "network": "other", "ipv4.address": "10.9.0.3"}}}),
            json!({"expanded_devices": {"eth0": {"type": "nic", "nictype": "bridged", "parent": "cohort0", "ipv4.address": "10.9.0.4"}}}),
            // Given by DHCP: no static address in the config.
            json!({"expanded_devices": {"eth0": {"type": "nic", "network": "cohort0"}}}),
            json!({"expanded_devices": {"ssh": {"type": "proxy", "network": "cohort0", "ipv4.address": "10.9.0.5"}}}),
        ];
        let taken: Vec<_> = taken_addresses(&listing, "cohort0")
            .into_iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(taken, ["10.9.0.2", "10.9.0.4"]);
    }

    #[test]
    fn reservations_lapse_and_round_trip() {
        let now = 1_000_000;
        let text = format!(
            "cohort0 10.9.0.2 {}\ncohort0 10.9.0.3 {}\nbad line\n",
            now - 1,
            now - RESERVATION_TTL_S
        );
        let live = live_reservations(&text, now);
        assert_eq!(
            live,
            vec![("cohort0".to_string(), "10.9.0.2".parse().unwrap(), now - 1)]
        );
        let dir = tempfile::tempdir().unwrap();
        let path = reservations_path(&dir.path().join("cohort-lxd-start-x.lock"));
        write_reservations(&path, &live).unwrap();
        assert_eq!(
            live_reservations(&std::fs::read_to_string(&path).unwrap(), now),
            live
        );
    }
}
