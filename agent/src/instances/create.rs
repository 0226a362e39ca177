//! Creating an instance, idempotently: the request is checked, the name looked up (same key and
//! spec: carry on from wherever the last attempt stopped; otherwise a conflict), the source and
//! home volume made sure of, the instance created (with its own SSH host key written in) and
//! started, the user provisioned, and the instance reported once sshd answers. Creates beyond
//! `max_concurrent_creates` wait their turn; calls with one idempotency key run one at a time,
//! and a create the daemon still runs is waited on, never acted on ([`super::in_flight`]).

use cohort_proto::agent::{CreateInstance, HomeSnapshots, Instance, InstanceSource};

use super::home_snapshots::{snapshot_config, snapshot_config_matches};
use super::spec::{plan, Plan};
use super::view::LxdInstance;
use super::Instances;
use super::{
    InstanceError, DEVICE_SSH, KEY_IDEMPOTENCY, KEY_ROOT_SIZE, KEY_SPEC, KEY_SSH_HOST_KEY,
};
use crate::guest::host_key::HostKey;
use crate::lxd::instances::InstancePut;
use crate::lxd::storage::{StorageVolumePut, StorageVolumesPost};
use crate::lxd::Config;
use crate::network::policy::{self, KEY_POLICY};
use crate::network::{ssh_proxy_device, DEVICE_NIC};

/// What `create_new` found or made.
enum Created {
    /// Made by this request; `host_key` when the instance serves SSH (its public half is
    /// already in the instance's config).
    Made { host_key: Option<HostKey> },
    /// Made by another request meanwhile.
    Exists(LxdInstance),
}

/// Whether the instance was created with an isolated range the agent picked, so its first start
/// needs no daemon-wide lock.
fn has_own_range(instance: &LxdInstance) -> bool {
    instance.config.contains_key("security.idmap.base")
}

impl Instances {
    /// `POST /v1/instances`.
    pub async fn create_instance(&self, req: &CreateInstance) -> Result<Instance, InstanceError> {
        let mut plan = plan(req, &self.config.storage_pool)?;
        if let (Some(network), Some(ssh)) = (&self.network.current, plan.ssh.as_mut()) {
            if network.nat_ssh() {
                ssh.listen_address = network.listen_for(&ssh.listen_address);
            }
        }
        // One call per key at a time: a retry never acts beside the call it retries.
        let _turn = self.in_flight.turn(&req.idempotency_key).await;
        let permit = self
            .creates
            .clone()
            .acquire_owned()
            .await
            .expect("create semaphore is never closed");
        // A container the daemon is still making is not one to act on: wait for it first.
        self.finish_daemon_create(&req.name).await?;
        let lx = self.lxd_instance(&req.name).await?;
        if let Some(existing) = &lx {
            same_request(existing, req, &plan)?;
        }
        let never_started = lx
            .as_ref()
            .is_none_or(|l| !l.config.contains_key("volatile.idmap.current"));
        if lx.is_none() || (req.start && never_started) {
            // LXD 5.0.2 gives a container an isolated range below /etc/subuid's while another
            // isolated container on the daemon is half-created (its range reads as 0; see
            // `idmap`). So on one daemon, every agent that drives it picks ranges under one
            // lock and reserves what it picked; a container made with a reserved range is
            // created and started in parallel with the others. Where no range could be picked
            // (LXD picks, or an older agent made it), the create and first start stay inside
            // the lock.
            let mut daemon = crate::lxd::lock::start_lock(&self.config.lxd_socket()).await;
            let (own_range, made_key, existing) = match lx {
                Some(existing) => (has_own_range(&existing), None, Some(existing)),
                None => {
                    let base = self.idmap.reserve_base().await?;
                    if base.is_some() {
                        drop(daemon.take());
                    }
                    // The agent is about to walk every file of the new container (`idmap::shift`). A
                    // quota on the fresh snapshot makes btrfs commit its transaction again and
                    // again during that walk (each change reserves metadata against the quota),
                    // so the quota is set once the walk is done, before the start.
                    let defer_size = req.start && self.idmap.remaps_first_start();
                    let created = self.create_new(req, &plan, base, defer_size).await;
                    if let Some(base) = base {
                        self.idmap.release_base(base).await;
                    }
                    match created? {
                        Created::Made { host_key } => (base.is_some(), host_key, None),
                        Created::Exists(existing) => {
                            same_request(&existing, req, &plan)?;
                            (has_own_range(&existing), None, Some(existing))
                        }
                    }
                }
            };
            if own_range {
                drop(daemon.take());
            }
            // Before the first start, so no process of the container runs without it.
            if let Some(cap) = crate::guest::cuda_cap::cap_of(&req.gpus) {
                self.install_cuda_cap(&req.name, cap).await?;
            }
            if req.start {
                if plan.ssh.is_some() {
                    match (made_key, existing) {
                        (Some(key), _) => self.install_host_key(&req.name, &key).await?,
                        (None, Some(existing)) => self.ensure_host_key(&existing).await?,
                        (None, None) => {}
                    }
                }
                self.prepare_guest_network(&req.name).await?;
                self.shift_before_first_start(&req.name).await?;
                self.apply_deferred_root_size(&req.name).await?;
                self.start_unlocked(&req.name).await?;
            }
        } else if req.start {
            self.start_instance(&req.name).await?;
        }
        if let Some(policy) = &req.network_policy {
            self.ensure_network_policy(&req.name, policy).await?;
        }
        if req.start {
            if let Some(ssh) = &plan.ssh {
                self.provision_user(&req.name, ssh).await?;
                drop(permit);
                self.await_sshd(&req.name, ssh).await?;
            }
        }
        self.instance(&req.name).await
    }

    /// Creates the instance, with the isolated range `base` the agent reserved for it when
    /// there is one (otherwise the caller holds the daemon's start lock and LXD picks), and with
    /// its root disk's quota held back in `KEY_ROOT_SIZE` when `defer_size` (see
    /// [`Instances::apply_deferred_root_size`]). `Exists` when another request made it meanwhile.
    async fn create_new(
        &self,
        req: &CreateInstance,
        plan: &Plan,
        base: Option<u64>,
        defer_size: bool,
    ) -> Result<Created, InstanceError> {
        self.check_source(&req.source).await?;
        if let Some(vol) = &req.home_volume {
            self.ensure_volume(vol, req.home_mib, req.home_snapshots)
                .await?;
        }
        let mut body = plan.body.clone();
        if let Some(base) = base {
            body.config
                .insert("security.idmap.base".into(), base.to_string());
        }
        if defer_size {
            let size = body
                .devices
                .get_mut("root")
                .and_then(|root| root.remove("size"));
            if let Some(size) = size {
                body.config.insert(KEY_ROOT_SIZE.into(), size);
            }
        }
        let host_key = match plan.ssh {
            Some(_) => Some(HostKey::generate(&req.name)?),
            None => None,
        };
        if let Some(key) = &host_key {
            body.config
                .insert(KEY_SSH_HOST_KEY.into(), key.public.clone());
        }
        if let Some(policy) = &req.network_policy {
            body.config
                .insert(KEY_POLICY.into(), policy::record(policy));
        }
        let network = self.network.current.clone();
        let address = match &network {
            Some(network) => {
                let address = self.network.reserve_address(network).await?;
                body.devices
                    .insert(DEVICE_NIC.into(), network.nic_device(address));
                if let Some((key, value)) = network.address_config(address) {
                    body.config.insert(key.into(), value);
                }
                if let Some(ssh) = &plan.ssh {
                    let proxy = ssh_proxy_device(
                        &ssh.listen_address,
                        ssh.port,
                        network.forward_to(Some(address)),
                    );
                    body.devices.insert(DEVICE_SSH.into(), proxy);
                }
                Some(address)
            }
            None => None,
        };
        let made = self.lxd.begin_create_instance(&body).await;
        let made = match made {
            Ok(Some(operation)) => {
                self.in_flight.started(&req.name, &operation);
                self.wait_daemon_create(&req.name, &operation).await
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e.into()),
        };
        if let (Some(network), Some(address)) = (&network, address) {
            self.network.release_address(network, address).await;
            // The new container's rules (its policy, or none left from an address's last holder)
            // are in place before it first starts.
            self.network.rebuild_firewall().await;
        }
        match made {
            Ok(_) => Ok(Created::Made { host_key }),
            Err(InstanceError::Lxd(e))
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already exists")) =>
            {
                match self.lxd_instance(&req.name).await? {
                    Some(existing) => Ok(Created::Exists(existing)),
                    // Made and deleted again meanwhile: nothing of ours to start.
                    None => Err(e.into()),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Waits (up to `create_wait_s`) for the daemon's create of `name`, `operation`: done,
    /// failed (LXD undid it), or still going (`StillCreating`, the operation kept for the retry).
    async fn wait_daemon_create(&self, name: &str, operation: &str) -> Result<(), InstanceError> {
        let seconds = self.config.create_wait_s;
        let what = format!("creating instance {name}");
        match self
            .lxd
            .wait_for(operation, &what, std::time::Duration::from_secs(seconds))
            .await
        {
            Err(crate::lxd::LxdError::Timeout { .. }) => {
                tracing::warn!(
                    instance = name,
                    operation,
                    seconds,
                    "LXD still creates the instance; a retry waits for it"
                );
                Err(InstanceError::StillCreating {
                    instance: name.to_string(),
                    seconds,
                })
            }
            // Gone from the daemon's list: it finished a while ago (LXD keeps a finished
            // operation a few seconds); what it left is looked up next.
            Err(e) if e.is_not_found() => {
                self.in_flight.finished(name);
                Ok(())
            }
            other => {
                self.in_flight.finished(name);
                other.map(|_| ()).map_err(Into::into)
            }
        }
    }

    /// Before a create acts on `name`: waits for a create of it the daemon still runs, the one
    /// this agent started or, after a restart, one found in the daemon's running operations.
    async fn finish_daemon_create(&self, name: &str) -> Result<(), InstanceError> {
        let operation = match self.in_flight.operation(name) {
            Some(operation) => Some(operation),
            None => self.lxd.running_create_of(name).await?,
        };
        match operation {
            Some(operation) => {
                tracing::info!(
                    instance = name,
                    operation,
                    "waiting for the daemon's create of it"
                );
                self.wait_daemon_create(name, &operation).await
            }
            None => Ok(()),
        }
    }

    /// Gives the root disk the quota `create_new` held back, if it did: a container never starts
    /// without it, whichever request starts it.
    pub(crate) async fn apply_deferred_root_size(&self, name: &str) -> Result<(), InstanceError> {
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        let Some(size) = lx.config.get(KEY_ROOT_SIZE) else {
            return Ok(());
        };
        let mut root = lx.devices.get("root").cloned().ok_or_else(|| {
            InstanceError::Internal(format!("instance {name} has no root disk of its own"))
        })?;
        root.insert("size".into(), size.clone());
        let patch = InstancePut {
            devices: Some([("root".into(), root)].into()),
            config: Some([(KEY_ROOT_SIZE.into(), String::new())].into()),
            ..Default::default()
        };
        self.lxd.patch_instance(name, &patch).await?;
        Ok(())
    }

    /// The image alias (or fingerprint) exists; the template exists and is stopped.
    async fn check_source(&self, source: &InstanceSource) -> Result<(), InstanceError> {
        match source {
            InstanceSource::Image { alias } => {
                let by_alias = self.lxd.get_image_alias(alias).await;
                match by_alias {
                    Ok(_) => Ok(()),
                    Err(e) if e.is_not_found() => match self.lxd.get_image(alias).await {
                        Ok(_) => Ok(()),
                        Err(e2) if e2.is_not_found() => Err(InstanceError::NotFound {
                            field: Some("source.alias".into()),
                            message: format!(
                                "image {alias:?} not found on node {} (LXD: {})",
                                self.config.node_name,
                                e.lxd_message().unwrap_or_default()
                            ),
                        }),
                        Err(e2) => Err(e2.into()),
                    },
                    Err(e) => Err(e.into()),
                }
            }
            InstanceSource::Copy { template } => match self.lxd_instance(template).await? {
                None => Err(InstanceError::NotFound {
                    field: Some("source.template".into()),
                    message: format!(
                        "template container {template:?} not found in LXD project {}",
                        self.lxd.project()
                    ),
                }),
                Some(t) if t.status != "Stopped" => Err(InstanceError::invalid(
                    "source.template",
                    format!(
                        "template container {template} is {}; stop it first",
                        t.status
                    ),
                )),
                Some(_) => Ok(()),
            },
        }
    }

    /// Creates the custom volume for a home directory unless it exists (it is never deleted with
    /// the instance), with LXD's `size` of `mib` MiB: a quota on the pool (a btrfs qgroup limit),
    /// so its student meets ENOSPC there and nobody else does. A volume that exists takes the
    /// size too (its course's may have changed since it was made), and so does its snapshot
    /// schedule (see `home_snapshots`).
    async fn ensure_volume(
        &self,
        volume: &str,
        mib: Option<u64>,
        snapshots: Option<HomeSnapshots>,
    ) -> Result<(), InstanceError> {
        let pool = &self.config.storage_pool;
        let size = mib.map(|m| format!("{m}MiB"));
        let schedule = snapshot_config(snapshots);
        match self.lxd.get_custom_volume(pool, volume).await {
            Ok(existing) => {
                let now = existing.config.get("size").map(String::as_str);
                let mut config = Config::new();
                if let Some(size) = size.as_ref().filter(|s| now != Some(s.as_str())) {
                    config.insert("size".to_string(), size.clone());
                }
                if !snapshot_config_matches(&existing.config, &schedule) {
                    config.extend(schedule);
                }
                if !config.is_empty() {
                    let put = StorageVolumePut { config };
                    self.lxd.patch_custom_volume(pool, volume, &put).await?;
                }
                return Ok(());
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        let mut config: Config = size
            .map(|size| ("size".to_string(), size))
            .into_iter()
            .collect();
        // Empty keys are left out of a new volume: off is simply no schedule.
        config.extend(schedule.into_iter().filter(|(_, v)| !v.is_empty()));
        let body = StorageVolumesPost {
            name: volume.into(),
            kind: "custom".into(),
            content_type: "filesystem".into(),
            config,
        };
        match self.lxd.create_volume(pool, &body).await {
            Ok(_) => Ok(()),
            Err(e)
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already exists")) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// An existing instance answers a create only when it was made from the same key and spec.
fn same_request(lx: &LxdInstance, req: &CreateInstance, plan: &Plan) -> Result<(), InstanceError> {
    let key = lx.config.get(KEY_IDEMPOTENCY).map(String::as_str);
    let spec = lx.config.get(KEY_SPEC).map(String::as_str);
    if key != Some(req.idempotency_key.as_str()) {
        return Err(InstanceError::Conflict(format!(
            "instance {} already exists with another idempotency key",
            req.name
        )));
    }
    if spec != Some(plan.spec_hash.as_str()) {
        return Err(InstanceError::Conflict(format!(
            "instance {} already exists with the same idempotency key but a different spec",
            req.name
        )));
    }
    Ok(())
}
