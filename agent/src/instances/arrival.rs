//! An instance imported from another node's backup made this node's own before it first starts
//! here. Its backup carries what was true on the node it left: the SSH forward on that node's
//! address and port, its NIC's address on that node's network, its isolated id range among
//! that daemon's containers, GPUs by that node's PCI addresses, and that node's pool names.
//! Everything else (its files, its SSH host key, its config and snapshots) stays as it was.

use crate::lxd::instances::InstancePut;
use cohort_proto::agent::{Arrival, Instance};

use super::Instances;
use super::{InstanceError, DEVICE_GPU_PREFIX, DEVICE_SSH, KEY_GPUS};
use crate::network::{ssh_proxy_device, DEVICE_NIC, KEY_ADDRESS};

impl Instances {
    /// `PUT /v1/instances/{name}/arrival`. The NIC is dropped and the instance gets one with an
    /// address of this node's network on its next start (`ensure_nic`, as for an instance
    /// made before the network); the same arrival again changes nothing that matters, so a
    /// retried step is harmless.
    pub async fn arrive(&self, name: &str, req: &Arrival) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        let ssh = match &req.ssh {
            Some(ssh) => Some(super::ssh::check_access(ssh)?),
            None => None,
        };
        for (i, gpu) in req.gpus.iter().enumerate() {
            super::spec::check_gpu(i, gpu)?;
        }
        let (current, etag) = match self.lxd.get_instance_current(name).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        if current.status != "Stopped" {
            return Err(InstanceError::Conflict(format!(
                "instance {name} is running; it arrives stopped"
            )));
        }
        let mut devices = current.devices();
        let mut config = current.config();

        devices.remove(DEVICE_NIC);
        config.remove(KEY_ADDRESS);
        // The classic forward on this node's address; `ensure_nic` turns it into a NAT one
        // where the node has a bridge, on the start that gives the NIC.
        devices.remove(DEVICE_SSH);
        if let Some(ssh) = &ssh {
            let listen = match &self.network.current {
                Some(network) if network.nat_ssh() => network.listen_for(&ssh.listen_address),
                _ => ssh.listen_address.clone(),
            };
            devices.insert(DEVICE_SSH.into(), ssh_proxy_device(&listen, ssh.port, None));
        }
        devices.retain(|dev, _| !dev.starts_with(DEVICE_GPU_PREFIX));
        devices.extend(super::spec::gpu_devices(&req.gpus));
        if req.gpus.is_empty() {
            for key in ["nvidia.runtime", "nvidia.driver.capabilities", KEY_GPUS] {
                config.remove(key);
            }
        } else {
            for (key, value) in super::spec::gpu_config(&req.gpus) {
                config.insert(key.into(), value);
            }
        }
        // The root disk and the home on this node's pool, whatever the other node called its.
        let pool = &self.config.storage_pool;
        for device in devices.values_mut() {
            if device.get("type").map(String::as_str) == Some("disk") && device.contains_key("pool")
            {
                device.insert("pool".into(), pool.clone());
            }
        }
        // A range of its own among this daemon's containers (the one it had may be another's
        // here); LXD shifts its files into it on the start.
        let base = self.idmap.reserve_base().await?;
        match base {
            Some(base) => {
                config.insert("security.idmap.base".into(), base.to_string());
            }
            None => {
                config.remove("security.idmap.base");
            }
        }
        let body = InstancePut::replacing(&current, config, devices);
        let put = self.lxd.update_instance(name, &body, etag.as_deref()).await;
        if let Some(base) = base {
            self.idmap.release_base(base).await;
        }
        put?;
        tracing::info!(
            instance = name,
            gpus = req.gpus.len(),
            "an imported instance made this node's"
        );
        self.instance(name).await
    }
}
