//! The network service: the node network (or why there is none), a container's address reserved
//! under the daemon-wide address lock and released once LXD holds the container, the free
//! addresses for the inventory, and the firewall table rebuilt from LXD's state.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::addresses::{self, taken_addresses};
use super::firewall::{self, ContainerRules, Egress};
use super::policy::{self, KEY_POLICY};
use super::{NetworkConfig, NetworkConfigError, NetworkError, NetworkKind, NodeNetwork};
use crate::lxd::Lxd;

/// The pauses before the node network's setup is tried again while the daemon fails it: 15 s
/// in all, then the node falls back.
const SETUP_PAUSES: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// Whether `e` is the daemon's own failure (worth another try), not its refusal of the request.
fn daemon_side(e: &crate::lxd::LxdError) -> bool {
    use crate::lxd::LxdError;
    match e {
        LxdError::Api { status, .. } => *status >= 500,
        LxdError::Unreachable { .. } | LxdError::Operation { .. } | LxdError::Timeout { .. } => {
            true
        }
        LxdError::Decode { .. } => false,
    }
}

/// Holds the daemon-wide lock under which addresses are picked.
async fn address_lock(socket: &Path) -> Option<nix::fcntl::Flock<std::fs::File>> {
    let path = addresses::lock_path(&crate::lxd::lock::start_lock_path(socket));
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&path).ok()?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
    })
    .await
    .ok()
    .flatten()
}

/// The node network as the rest of the agent holds it.
pub struct Network {
    lxd: Lxd,
    lxd_socket: PathBuf,
    /// The node network; `None` in mode `none` or where it could not be had (`problem` says
    /// why): SSH then goes through LXD's classic proxy.
    pub current: Option<NodeNetwork>,
    pub problem: Option<String>,
}

impl Network {
    /// Finds (or makes) the node network. A config the admin got wrong stops the agent; a
    /// network LXD cannot give (no firewall tool when LXD started, a name taken by something
    /// else) leaves the node in fallback mode, said in the log, the inventory and `doctor`. A
    /// failure of the daemon itself (unreachable, a 5xx, a failed or late operation) is tried
    /// again first: a node falls back until its agent restarts, so a daemon still starting at
    /// boot, or too loaded to answer in time, must not make every container NIC-less.
    pub async fn connect(
        lxd: Lxd,
        lxd_socket: PathBuf,
        config: &NetworkConfig,
    ) -> Result<Self, NetworkConfigError> {
        Self::connect_with(lxd, lxd_socket, config, &SETUP_PAUSES).await
    }

    /// [`Network::connect`], trying the setup again after each of `pauses` while the daemon
    /// fails it.
    pub(super) async fn connect_with(
        lxd: Lxd,
        lxd_socket: PathBuf,
        config: &NetworkConfig,
        pauses: &[Duration],
    ) -> Result<Self, NetworkConfigError> {
        let mut pauses = pauses.iter();
        let setup = loop {
            match NodeNetwork::setup(&lxd, config).await {
                Err(NetworkError::Lxd(e)) if daemon_side(&e) => match pauses.next() {
                    Some(pause) => {
                        tracing::warn!(network = %config.name, error = %e, retry_in = ?pause,
                            "the daemon failed the node network's setup; trying again");
                        tokio::time::sleep(*pause).await;
                    }
                    None => break Err(NetworkError::Lxd(e)),
                },
                other => break other,
            }
        };
        let (current, problem) = match setup {
            Ok(n) => (n, None),
            Err(NetworkError::Config(e)) => return Err(e),
            Err(e) => {
                tracing::error!(error = %e, "no node network: containers get no NIC, SSH goes through LXD's classic proxy");
                (None, Some(e.to_string()))
            }
        };
        Ok(Network {
            lxd,
            lxd_socket,
            current,
            problem,
        })
    }

    /// Every instance of the daemon (all projects, `recursion=1`).
    async fn daemon_listing(&self) -> Result<Vec<Value>, NetworkError> {
        Ok(self.lxd.get_instances_all_projects().await?)
    }

    /// The addresses on `network` held now: by instances, by DHCP leases and by reservations.
    async fn held_addresses(
        &self,
        network: &NodeNetwork,
        reservations: &[(String, Ipv4Addr, u64)],
    ) -> Result<BTreeSet<Ipv4Addr>, NetworkError> {
        let mut taken = taken_addresses(&self.daemon_listing().await?, &network.name);
        // A macvlan has no LXD DHCP server, so no leases (LXD refuses to list them).
        if network.kind == NetworkKind::Bridge {
            for lease in self.lxd.network_leases(&network.name).await? {
                if let Ok(a) = lease.address.parse() {
                    taken.insert(a);
                }
            }
        }
        taken.extend(
            reservations
                .iter()
                .filter(|(n, _, _)| *n == network.name)
                .map(|(_, a, _)| *a),
        );
        Ok(taken)
    }

    /// Picks a free address for a container about to get its NIC and reserves it until
    /// [`Network::release_address`].
    pub(crate) async fn reserve_address(
        &self,
        network: &NodeNetwork,
    ) -> Result<Ipv4Addr, NetworkError> {
        let _lock = address_lock(&self.lxd_socket).await;
        let path = self.address_reservations_path();
        let now = addresses::unix_now();
        let mut live =
            addresses::live_reservations(&std::fs::read_to_string(&path).unwrap_or_default(), now);
        let taken = self.held_addresses(network, &live).await?;
        let address = network
            .pick(&taken)
            .ok_or_else(|| NetworkError::Full(network.name.clone()))?;
        live.push((network.name.clone(), address, now));
        addresses::write_reservations(&path, &live).map_err(|e| {
            NetworkError::Reservation(format!("reserving an address in {}: {e}", path.display()))
        })?;
        Ok(address)
    }

    /// Drops the reservation of `address` (LXD now holds it, or the create failed).
    pub(crate) async fn release_address(&self, network: &NodeNetwork, address: Ipv4Addr) {
        let _lock = address_lock(&self.lxd_socket).await;
        let path = self.address_reservations_path();
        let live: Vec<_> = addresses::live_reservations(
            &std::fs::read_to_string(&path).unwrap_or_default(),
            addresses::unix_now(),
        )
        .into_iter()
        .filter(|(n, a, _)| !(*n == network.name && *a == address))
        .collect();
        if let Err(e) = addresses::write_reservations(&path, &live) {
            tracing::warn!(path = %path.display(), error = %e, "cannot drop an address reservation; it lapses by itself");
        }
    }

    fn address_reservations_path(&self) -> PathBuf {
        addresses::reservations_path(&crate::lxd::lock::start_lock_path(&self.lxd_socket))
    }

    /// Free addresses on the node network now (for the inventory).
    pub async fn free_addresses(&self, network: &NodeNetwork) -> Result<u32, NetworkError> {
        Ok(network.free(&self.held_addresses(network, &[]).await?))
    }

    /// Rebuilds the firewall table from LXD's state (every container on the node network with
    /// its course's policy); logs instead of failing, since LXD's state stays the record and
    /// the next change rebuilds it again. `doctor` reports a table that is missing.
    pub async fn rebuild_firewall(&self) {
        let Some(network) = &self.current else {
            return;
        };
        if network.kind == NetworkKind::Macvlan {
            // Nothing between a macvlan's children and the LAN passes the host's netfilter, and
            // the host cannot reach them: there is nothing for the table to guard.
            return;
        }
        let _lock = address_lock(&self.lxd_socket).await;
        let listing = match self.daemon_listing().await {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot list instances to rebuild the firewall");
                return;
            }
        };
        let rules: Vec<ContainerRules> = listing
            .iter()
            .filter_map(|inst| container_rules(inst, &network.name))
            .collect();
        let neighbours = match self.lxd.networks().await {
            Ok(all) => other_bridges(&all, &network.name),
            Err(e) => {
                tracing::error!(error = %e, "cannot list LXD's networks to rebuild the firewall");
                return;
            }
        };
        if let Err(e) = firewall::apply(&firewall::script(network, &neighbours, &rules)).await {
            tracing::error!(error = %e, "cannot write the firewall table");
        }
    }
}

/// The subnets of the LXD bridges other than `ours`.
fn other_bridges(all: &[crate::lxd::networks::LxdNetwork], ours: &str) -> Vec<ipnet::Ipv4Net> {
    all.iter()
        .filter(|n| n.name != ours && n.kind == "bridge")
        .filter_map(|n| n.config.get("ipv4.address")?.parse::<ipnet::Ipv4Net>().ok())
        .map(|n| n.trunc())
        .collect()
}

/// A container's rules from its LXD config: its address on `network` and the policy recorded
/// on it (none recorded: open, SSH from anywhere).
fn container_rules(inst: &Value, network: &str) -> Option<ContainerRules> {
    let one = std::slice::from_ref(inst);
    let address = *taken_addresses(one, network).iter().next()?;
    let recorded = inst
        .get("config")
        .and_then(|c| c.get(KEY_POLICY))
        .and_then(Value::as_str);
    let (egress, ssh_from) = match recorded.map(policy::parse) {
        Some(Ok(p)) => (p.egress, p.ssh_from),
        Some(Err(e)) => {
            // The agent wrote it; a bad one is an edit by hand. Closed, not open.
            tracing::error!(error = %e, %address, "unreadable network policy; egress closed");
            (Egress::None, Vec::new())
        }
        None => (Egress::Open, Vec::new()),
    };
    Some(ContainerRules {
        address,
        egress,
        ssh_from,
    })
}
