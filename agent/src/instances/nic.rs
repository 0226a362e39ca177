//! The instance side of the node network: a NIC for an instance made before the network, the
//! guest's network files written before each start (`guest::network`), and a course's network
//! policy recorded on the instance (`network::policy`), which the firewall table enforces.

use cohort_proto::agent::{Instance, NetworkPolicy};

use super::{InstanceError, Instances, DEVICE_SSH};
use crate::lxd::instances::InstancePut;
use crate::lxd::{Config, Devices};
use crate::network::policy::{self, KEY_POLICY};
use crate::network::{nic_address, ssh_proxy_device, DEVICE_NIC};

impl Instances {
    /// Gives the stopped instance `name`, made before the node had its network, a NIC with an
    /// address of its own, turns its SSH forward into a NAT one, and writes the files that
    /// configure the NIC inside. Nothing else of the instance changes. A running instance gets
    /// the NIC plugged in and configured at once. No-op where the NIC is there.
    pub(crate) async fn ensure_nic(&self, name: &str) -> Result<(), InstanceError> {
        let Some(network) = self.network.current.clone() else {
            return Ok(());
        };
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        if nic_address(&lx.config, &lx.devices).is_some() {
            return Ok(());
        }
        let address = self.network.reserve_address(&network).await?;
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
        self.network.release_address(&network, address).await;
        patched?;
        tracing::info!(instance = name, %address, "gave an instance made before the node network its NIC");
        if lx.is_running() {
            self.apply_guest_network(name, &network, address).await?;
        } else {
            self.write_guest_network(name, &network, address).await?;
        }
        self.network.rebuild_firewall().await;
        Ok(())
    }

    /// Before a container starts: its NIC (given now to one made before the network) and the
    /// files that configure it inside, written again on each start of a stopped container, so a
    /// create that died between the two, or one made without a start, boots configured. A
    /// running container with its NIC is left alone.
    pub(crate) async fn prepare_guest_network(&self, name: &str) -> Result<(), InstanceError> {
        let Some(network) = self.network.current.clone() else {
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

    /// `PUT /v1/instances/{name}/network-policy`: records the policy on the instance and
    /// rebuilds the firewall table, which applies it at once.
    pub async fn set_network_policy(
        &self,
        name: &str,
        policy: &NetworkPolicy,
    ) -> Result<Instance, InstanceError> {
        policy::check(policy)?;
        let patch = InstancePut::config([(KEY_POLICY.into(), policy::record(policy))].into());
        match self.lxd.patch_instance(name, &patch).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        }
        self.network.rebuild_firewall().await;
        self.instance(name).await
    }
}
