//! Live changes to an instance: config keys set and unset, devices added and removed, checked
//! with the create rules (shared with the controller) and applied to LXD in one call. Sets,
//! unsets and additions go in one `PATCH` (a key set to "" is removed; devices merge by name);
//! a removal needs the whole local `config` and `devices` (never `expanded_*`, which would copy
//! profile values into the instance) `PUT` back under the `ETag` just read.

use std::collections::BTreeMap;
use std::net::IpAddr;

use cohort_proto::agent::{AttachGpus, Instance, UpdateInstance};
use cohort_proto::validate::{self, DeviceRules};

use super::spec::check_config_key;
use super::InstanceError;
use super::Instances;
use crate::lxd::instances::{InstanceCurrent, InstancePut};
use crate::lxd::{Config, Devices, LxdError};

impl Instances {
    /// `PATCH /v1/instances/{name}`.
    pub async fn update_instance(
        &self,
        name: &str,
        req: &UpdateInstance,
    ) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        let mut req = req.clone();
        self.check_update(&mut req)?;
        let (current, etag) = match self.lxd.get_instance_current(name).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        let devices = current.devices();
        for dev in req.add_devices.keys() {
            if devices.contains_key(dev) {
                return Err(InstanceError::Conflict(format!(
                    "device {dev} already exists on {name}; remove it first"
                )));
            }
        }
        for dev in &req.remove_devices {
            if !devices.contains_key(dev) {
                return Err(InstanceError::NotFound {
                    field: Some(format!("remove_devices.{dev}")),
                    message: format!("{name} has no device {dev}"),
                });
            }
        }
        for (dev, conf) in req.add_devices.iter_mut() {
            if conf.get("type").is_some_and(|t| t == "disk") {
                if conf.get("source").is_some_and(|s| s.starts_with('/')) {
                    self.resolve_host_source(dev, conf)?;
                } else {
                    self.check_volume(dev, conf).await?;
                }
            }
        }
        check_config_size(&current, &req)?;

        let mut sets: Config = req.config.clone();
        let added: Devices = req.add_devices.clone();
        if req.remove_devices.is_empty() {
            for key in &req.unset {
                sets.insert(key.clone(), String::new());
            }
            let patch = InstancePut {
                config: Some(sets),
                devices: Some(added),
                ..Default::default()
            };
            self.lxd
                .patch_instance(name, &patch)
                .await
                .map_err(|e| refused_values(e, &req))?;
        } else {
            let mut config = current.config();
            for key in &req.unset {
                config.remove(key);
            }
            config.extend(sets);
            let mut devices = devices;
            for dev in &req.remove_devices {
                devices.remove(dev);
            }
            devices.extend(added);
            let body = InstancePut::replacing(&current, config, devices);
            self.lxd
                .update_instance(name, &body, etag.as_deref())
                .await
                .map_err(|e| refused_values(e, &req))?;
        }
        self.instance(name).await
    }

    /// `POST /v1/instances/{name}/gpus/detach`: removes every `cohort-gpu*` device (the GPUs the
    /// controller allocated) from the instance, running or not; LXD hot-unplugs them from a
    /// running container. Only the controller reaches the agent (mutual TLS), and it calls this
    /// for the reclaimer alone, so a user can never take Cohort's devices off through it (the
    /// public PATCH still refuses them). Having none is success, so a retried step is harmless.
    pub async fn detach_gpus(&self, name: &str) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        let (current, etag) = match self.lxd.get_instance_current(name).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        let mut devices = current.devices();
        let before = devices.len();
        devices.retain(|dev, _| !dev.starts_with(super::DEVICE_GPU_PREFIX));
        if devices.len() != before {
            let removed = before - devices.len();
            let body = InstancePut::replacing(&current, current.config(), devices);
            self.lxd
                .update_instance(name, &body, etag.as_deref())
                .await?;
            tracing::info!(instance = %name, removed, "GPUs detached");
        }
        self.instance(name).await
    }

    /// `PUT /v1/instances/{name}/gpus`: the GPUs the controller gave the instance back after
    /// releasing them (an idle stop or a detach) replace its `cohort-gpu*` devices, with the
    /// NVIDIA runtime on, and a shared GPU's memory cap installed first. Sent while the instance is
    /// stopped (a MIG device cannot be hot-plugged); the same list again changes nothing, so a
    /// retried step is harmless.
    pub async fn attach_gpus(
        &self,
        name: &str,
        req: &AttachGpus,
    ) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        for (i, gpu) in req.gpus.iter().enumerate() {
            super::spec::check_gpu(i, gpu)?;
        }
        let (current, etag) = match self.lxd.get_instance_current(name).await {
            Ok(found) => found,
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        };
        // The cap before the GPU: a container that gets a shared GPU back (or its first one, on
        // demand) never runs a process on it without its memory cap, whatever it was made with.
        if let Some(cap) = crate::guest::cuda_cap::cap_of(&req.gpus) {
            self.install_cuda_cap(name, cap).await?;
        }
        let mut devices = current.devices();
        devices.retain(|dev, _| !dev.starts_with(super::DEVICE_GPU_PREFIX));
        devices.extend(super::spec::gpu_devices(&req.gpus));
        let mut config = current.config();
        if !req.gpus.is_empty() {
            for (key, value) in super::spec::gpu_config(&req.gpus) {
                config.insert(key.into(), value);
            }
        }
        let body = InstancePut::replacing(&current, config, devices);
        self.lxd
            .update_instance(name, &body, etag.as_deref())
            .await?;
        tracing::info!(instance = %name, gpus = req.gpus.len(), "GPUs attached");
        self.instance(name).await
    }

    /// Every key and device against the shared rules, before LXD is asked anything.
    fn check_update(&self, req: &mut UpdateInstance) -> Result<(), InstanceError> {
        for (key, value) in &req.config {
            check_config_key(key, value)?;
        }
        for key in &req.unset {
            validate::config_key(key)
                .map_err(|e| InstanceError::invalid(format!("unset.{key}"), e.0))?;
            if req.config.contains_key(key) {
                return Err(InstanceError::invalid(
                    format!("unset.{key}"),
                    "a key cannot be both set and unset",
                ));
            }
        }
        let rules = DeviceRules {
            allow_host_path: req.allow_host_path,
            listen_addresses: self.node_addresses(),
            state_dirs: self.state_dirs(),
        };
        for (dev, conf) in &req.add_devices {
            validate::device(dev, conf, &rules)
                .map_err(|e| InstanceError::invalid(e.field, e.message))?;
        }
        for dev in &req.remove_devices {
            if validate::is_cohort_device(dev) {
                return Err(InstanceError::Conflict(format!(
                    "device {dev} is managed by Cohort (root disk, SSH proxy, home volume or an allocated GPU) and cannot be removed"
                )));
            }
            if req.add_devices.contains_key(dev) {
                return Err(InstanceError::invalid(
                    format!("remove_devices.{dev}"),
                    "a device cannot be both added and removed",
                ));
            }
        }
        Ok(())
    }

    /// Addresses a proxy device may listen on besides loopback: the node's SSH address.
    fn node_addresses(&self) -> Vec<IpAddr> {
        self.config
            .ssh_listen
            .parse::<IpAddr>()
            .ok()
            .filter(|ip| !ip.is_unspecified())
            .into_iter()
            .collect()
    }

    /// A disk's custom volume must exist in this node's pool; the pool is filled in.
    async fn check_volume(
        &self,
        dev: &str,
        conf: &mut BTreeMap<String, String>,
    ) -> Result<(), InstanceError> {
        let pool = &self.config.storage_pool;
        if conf.get("pool").is_some_and(|p| p != pool) {
            return Err(InstanceError::invalid(
                format!("devices.{dev}.pool"),
                format!("volumes come from this node's pool {pool}"),
            ));
        }
        let source = conf.get("source").cloned().unwrap_or_default();
        match self.lxd.get_custom_volume(pool, &source).await {
            Ok(_) => {
                conf.insert("pool".into(), pool.clone());
                Ok(())
            }
            Err(e) if e.is_not_found() => Err(InstanceError::NotFound {
                field: Some(format!("devices.{dev}.source")),
                message: format!("no custom volume {source} in pool {pool}"),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

/// LXD 5.0 answers a config value or device it refuses with a 500 starting `Invalid config` or
/// `Invalid devices`: the caller's values, so a 400 naming them (the key when there is one).
fn refused_values(e: LxdError, req: &UpdateInstance) -> InstanceError {
    let message = e.lxd_message().unwrap_or_default().to_string();
    let one = |keys: Vec<&String>, base: &str| match keys.as_slice() {
        [key] => format!("{base}.{key}"),
        _ => base.to_string(),
    };
    if message.starts_with("Invalid config") {
        let keys = req.config.keys().collect();
        return InstanceError::invalid(one(keys, "config"), message);
    }
    if message.starts_with("Invalid devices") {
        let names = req.add_devices.keys().collect();
        return InstanceError::invalid(one(names, "devices"), message);
    }
    e.into()
}

/// The `user.*` and `environment.*` keys the instance would carry after `req`, within the
/// shared bounds (the controller checks its record; this is LXD's own config).
fn check_config_size(current: &InstanceCurrent, req: &UpdateInstance) -> Result<(), InstanceError> {
    let mut config: BTreeMap<&str, &str> = current
        .put
        .config
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    for key in &req.unset {
        config.remove(key.as_str());
    }
    config.extend(req.config.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    validate::free_config_size(config).map_err(|e| InstanceError::invalid("config", e.0))
}
