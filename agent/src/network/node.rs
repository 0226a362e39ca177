//! What the node does with its network: reserve a container's address under the daemon-wide
//! address lock and release it once LXD holds the container, give an instance made before
//! the network its NIC, and rebuild the firewall table from LXD's state.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde_json::Value;

use super::addresses::{self, taken_addresses};
use super::firewall::{self, ContainerRules, Egress};
use super::policy::{self, KEY_POLICY};
use super::{nic_address, ssh_proxy_device, NetworkError, NetworkKind, NodeNetwork, DEVICE_NIC};
use crate::instances::{InstanceError, DEVICE_SSH};
use crate::lxd::instances::InstancePut;
use crate::lxd::{Config, Devices};
use crate::node::Node;

/// Holds the daemon-wide lock under which addresses are picked.
async fn address_lock(node: &Node) -> Option<nix::fcntl::Flock<std::fs::File>> {
    let path = addresses::lock_path(&crate::instances::start_lock_path(
        &node.config.lxd_socket(),
    ));
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::create(&path).ok()?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive).ok()
    })
    .await
    .ok()
    .flatten()
}

impl Node {
    /// Every instance of the daemon (all projects, `recursion=1`).
    async fn daemon_listing(&self) -> Result<Vec<Value>, InstanceError> {
        Ok(self.lxd.get_instances_all_projects().await?)
    }

    /// The addresses on `network` held now: by instances, by DHCP leases and by reservations.
    async fn held_addresses(
        &self,
        network: &NodeNetwork,
        reservations: &[(String, Ipv4Addr, u64)],
    ) -> Result<BTreeSet<Ipv4Addr>, InstanceError> {
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
    /// [`Node::release_address`].
    pub(crate) async fn reserve_address(
        &self,
        network: &NodeNetwork,
    ) -> Result<Ipv4Addr, InstanceError> {
        let _lock = address_lock(self).await;
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
            InstanceError::Internal(format!("reserving an address in {}: {e}", path.display()))
        })?;
        Ok(address)
    }

    /// Drops the reservation of `address` (LXD now holds it, or the create failed).
    pub(crate) async fn release_address(&self, network: &NodeNetwork, address: Ipv4Addr) {
        let _lock = address_lock(self).await;
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

    fn address_reservations_path(&self) -> std::path::PathBuf {
        addresses::reservations_path(&crate::instances::start_lock_path(
            &self.config.lxd_socket(),
        ))
    }

    /// Free addresses on the node network now (for the inventory).
    pub async fn free_addresses(&self, network: &NodeNetwork) -> Result<u32, InstanceError> {
        Ok(network.free(&self.held_addresses(network, &[]).await?))
    }

    /// Gives the stopped instance `name`, made before the node had its network, a NIC with an
    /// address of its own, turns its SSH forward into a NAT one, and writes the files that
    /// configure the NIC inside. Nothing else of the instance changes. A running instance gets
    /// the NIC plugged in and configured at once. No-op where the NIC is there.
    pub(crate) async fn ensure_nic(&self, name: &str) -> Result<(), InstanceError> {
        let Some(network) = self.network.clone() else {
            return Ok(());
        };
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        if nic_address(&lx.config, &lx.devices).is_some() {
            return Ok(());
        }
        let address = self.reserve_address(&network).await?;
        let mut devices = Devices::new();
        devices.insert(DEVICE_NIC.into(), network.nic_device(address));
        // On a macvlan the classic proxy stays as it is: the host cannot reach the container.
        if let (Some((listen, port)), true) = (lx.ssh_endpoint(), network.nat_ssh()) {
            let listen = network.listen_for(&listen);
            devices.insert(
                DEVICE_SSH.into(),
                ssh_proxy_device(&listen, port, Some(address)),
            );
        }
        let mut config = Config::new();
        if let Some((key, value)) = network.address_config(address) {
            config.insert(key.into(), value);
        }
        let patch = InstancePut {
            devices: Some(devices),
            config: Some(config),
            ..Default::default()
        };
        let patched = self.lxd.patch_instance(name, &patch).await;
        self.release_address(&network, address).await;
        patched?;
        tracing::info!(instance = name, %address, "gave an instance made before the node network its NIC");
        if lx.is_running() {
            self.apply_guest_network(name, &network, address).await?;
        } else {
            self.write_guest_network(name, &network, address).await?;
        }
        self.rebuild_firewall().await;
        Ok(())
    }

    /// Before a container starts: its NIC (given now to one made before the network) and the
    /// files that configure it inside, written again on each start of a stopped container, so a
    /// create that died between the two, or one made without a start, boots configured. A
    /// running container with its NIC is left alone.
    pub(crate) async fn prepare_guest_network(&self, name: &str) -> Result<(), InstanceError> {
        let Some(network) = self.network.clone() else {
            return Ok(());
        };
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        match nic_address(&lx.config, &lx.devices) {
            Some(address) if !lx.is_running() => {
                self.write_guest_network(name, &network, address).await
            }
            Some(_) => Ok(()),
            None => self.ensure_nic(name).await,
        }
    }

    /// Records `policy` on `name` unless it is there already (a create that finds the instance).
    pub(crate) async fn ensure_network_policy(
        &self,
        name: &str,
        policy: &cohort_proto::agent::NetworkPolicy,
    ) -> Result<(), InstanceError> {
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        if lx.config.get(KEY_POLICY) == Some(&policy::record(policy)) {
            return Ok(());
        }
        self.set_network_policy(name, policy).await.map(|_| ())
    }

    /// Rebuilds the firewall table from LXD's state (every container on the node network with
    /// its course's policy); logs instead of failing, since LXD's state stays the record and
    /// the next change rebuilds it again. `doctor` reports a table that is missing.
    pub async fn rebuild_firewall(&self) {
        let Some(network) = &self.network else {
            return;
        };
        if network.kind == NetworkKind::Macvlan {
            // Nothing between a macvlan's children and the LAN passes the host's netfilter, and
            // the host cannot reach them: there is nothing for the table to guard.
            return;
        }
        let _lock = address_lock(self).await;
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
