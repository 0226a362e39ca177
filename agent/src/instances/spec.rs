//! A create request checked and turned into LXD's instance body. Everything a student or
//! instructor could send is validated here, before anything reaches LXD.

use std::net::IpAddr;

use cohort_proto::agent::{CreateInstance, GpuAttachment, InstanceSource, SshAccess};
use cohort_proto::validate;
use sha2::{Digest, Sha256};

use super::{InstanceError, DEVICE_GPU_PREFIX, DEVICE_HOME, DEVICE_SSH};
use super::{KEY_GPUS, KEY_IDEMPOTENCY, KEY_SPEC, KEY_SSH_USER};
use crate::lxd::instances::{InstanceSource as LxdSource, InstancesPost};
use crate::lxd::{Config, Devices};
use crate::network::device;

/// A checked request, ready for LXD.
pub struct Plan {
    /// The body of `POST /1.0/instances`.
    pub body: InstancesPost,
    /// SHA-256 (hex) of the normalised request without its idempotency key.
    pub spec_hash: String,
    /// SSH access with keys in canonical form.
    pub ssh: Option<SshAccess>,
}

/// The smallest and largest home volume, in MiB (as the controller allows them).
const HOME_MIB_MIN: u64 = 32;
const HOME_MIB_MAX: u64 = 16 << 20;

/// Checks `req` and builds LXD's body. `pool` is the storage pool for root and home.
pub fn plan(req: &CreateInstance, pool: &str) -> Result<Plan, InstanceError> {
    super::check_name(&req.name)?;
    let mut req = req.clone();
    if req.idempotency_key.trim().is_empty() || req.idempotency_key.len() > 200 {
        return Err(InstanceError::invalid(
            "idempotency_key",
            "must be 1-200 characters",
        ));
    }
    check_source(&req.source)?;
    check_limits(&req)?;
    for (key, value) in &req.config {
        check_config_key(key, value)?;
    }
    if let Some(ssh) = req.ssh.as_mut() {
        check_ssh(ssh)?;
    }
    if let Some(vol) = &req.home_volume {
        validate::instance_name(vol).map_err(|e| {
            InstanceError::invalid("home_volume", e.0.replace("instance", "volume"))
        })?;
        if req.ssh.is_none() {
            return Err(InstanceError::invalid(
                "home_volume",
                "a home volume needs ssh (it is mounted at /home/<ssh.username>)",
            ));
        }
    }
    match (req.home_mib, &req.home_volume) {
        (Some(_), None) => {
            return Err(InstanceError::invalid(
                "home_mib",
                "a home size needs a home_volume",
            ))
        }
        (Some(m), Some(_)) if !(HOME_MIB_MIN..=HOME_MIB_MAX).contains(&m) => {
            return Err(InstanceError::invalid(
                "home_mib",
                format!("must be {HOME_MIB_MIN} to {HOME_MIB_MAX}"),
            ))
        }
        _ => {}
    }
    for (i, gpu) in req.gpus.iter().enumerate() {
        check_gpu(i, gpu)?;
    }
    if let Some(policy) = &req.network_policy {
        crate::network::policy::check(policy)?;
    }

    let spec_hash = spec_hash(&req);
    let mut config: Config = req.config.clone();
    let mut set = |k: &str, v: String| config.insert(k.to_string(), v);
    set("limits.cpu", req.limits.cpu.to_string());
    set("limits.memory", format!("{}MiB", req.limits.memory_mib));
    // Follows the desired state (see `Instances::set_autostart`): a container made stopped stays
    // stopped when the node or LXD restarts.
    set("boot.autostart", req.start.to_string());
    set("security.idmap.isolated", "true".into());
    set(KEY_IDEMPOTENCY, req.idempotency_key.clone());
    set(KEY_SPEC, spec_hash.clone());
    if let Some(ssh) = &req.ssh {
        set(KEY_SSH_USER, ssh.username.clone());
    }
    if !req.gpus.is_empty() {
        for (key, value) in gpu_config(&req.gpus) {
            set(key, value);
        }
    }

    let mut devices = Devices::new();
    devices.insert(
        "root".into(),
        device([
            ("type", "disk".into()),
            ("path", "/".into()),
            ("pool", pool.into()),
            ("size", format!("{}GiB", req.limits.disk_gib)),
        ]),
    );
    if let Some(ssh) = &req.ssh {
        // The classic proxy; a node with a network replaces it with a NAT one (`create`).
        devices.insert(
            DEVICE_SSH.into(),
            crate::network::ssh_proxy_device(&ssh.listen_address, ssh.port, None),
        );
        if let Some(vol) = &req.home_volume {
            devices.insert(
                DEVICE_HOME.into(),
                device([
                    ("type", "disk".into()),
                    ("pool", pool.into()),
                    ("source", vol.clone()),
                    ("path", format!("/home/{}", ssh.username)),
                ]),
            );
        }
    }
    devices.extend(gpu_devices(&req.gpus));

    let source = match &req.source {
        InstanceSource::Image { alias } => LxdSource::Image {
            alias: alias.clone(),
        },
        InstanceSource::Copy { template } => LxdSource::Copy {
            source: template.clone(),
            instance_only: true,
        },
    };
    let body = InstancesPost {
        name: req.name.clone(),
        kind: "container".into(),
        source,
        // No profiles: the agent states every device, so nothing from a profile (a NIC, another
        // pool) slips in.
        profiles: Vec::new(),
        config,
        devices,
    };
    Ok(Plan {
        body,
        spec_hash,
        ssh: req.ssh,
    })
}

/// The hash stored in `user.cohort.spec`: the normalised request minus its idempotency key.
pub fn spec_hash(req: &CreateInstance) -> String {
    let mut req = req.clone();
    req.idempotency_key.clear();
    // A course's policy changes while its containers live: not part of what was made. Nor is
    // the home's size: the home outlives the container, and takes the course's size anew.
    req.network_policy = None;
    req.home_mib = None;
    req.home_snapshots = None;
    let bytes = serde_json::to_vec(&req).expect("request serialises");
    hex::encode(Sha256::digest(bytes))
}

fn check_source(source: &InstanceSource) -> Result<(), InstanceError> {
    let (field, value) = match source {
        InstanceSource::Image { alias } => ("source.alias", alias),
        InstanceSource::Copy { template } => ("source.template", template),
    };
    let ok = !value.is_empty()
        && value.len() <= 255
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:".contains(&b));
    if !ok {
        return Err(InstanceError::invalid(
            field,
            format!("{value:?} is not a valid LXD name"),
        ));
    }
    if let InstanceSource::Copy { template } = source {
        validate::instance_name(template).map_err(|e| InstanceError::invalid(field, e.0))?;
    }
    Ok(())
}

fn check_limits(req: &CreateInstance) -> Result<(), InstanceError> {
    let l = &req.limits;
    check_cores_memory("limits.", l.cpu, l.memory_mib)?;
    if l.disk_gib == 0 {
        return Err(InstanceError::invalid(
            "limits.disk_gib",
            "must be at least 1 GiB",
        ));
    }
    Ok(())
}

/// Cores and memory, at a create and when they change live; `prefix` leads the fields' names.
pub(super) fn check_cores_memory(
    prefix: &str,
    cpu: u32,
    memory_mib: u64,
) -> Result<(), InstanceError> {
    if cpu == 0 || cpu > 1024 {
        return Err(InstanceError::invalid(
            format!("{prefix}cpu"),
            "must be 1-1024 cores",
        ));
    }
    if memory_mib < 64 {
        return Err(InstanceError::invalid(
            format!("{prefix}memory_mib"),
            "must be at least 64 MiB",
        ));
    }
    Ok(())
}

/// The create and live-change rule, shared with the controller (`validate::config_key`).
pub(crate) fn check_config_key(key: &str, value: &str) -> Result<(), InstanceError> {
    let field = format!("config.{key}");
    validate::config_key(key).map_err(|e| InstanceError::invalid(&field, e.0))?;
    validate::config_value(value).map_err(|e| InstanceError::invalid(&field, e.0))
}

fn check_ssh(ssh: &mut SshAccess) -> Result<(), InstanceError> {
    validate::username(&ssh.username).map_err(|e| InstanceError::invalid("ssh.username", e.0))?;
    for (i, key) in ssh.authorized_keys.iter_mut().enumerate() {
        *key = validate::ssh_public_key(key)
            .map_err(|e| InstanceError::invalid(format!("ssh.authorized_keys[{i}]"), e.0))?;
    }
    // Neither keys nor a password is allowed: the user is made with a locked password and an
    // empty authorized_keys (an account whose person has not added a key yet, or removed
    // their last one), so nothing is open until a key arrives.
    if let Some(hash) = &ssh.password_hash {
        validate::password_hash(hash)
            .map_err(|e| InstanceError::invalid("ssh.password_hash", e.0))?;
    }
    ssh.listen_address
        .parse::<IpAddr>()
        .map_err(|_| InstanceError::invalid("ssh.listen_address", "must be an IP address"))?;
    if ssh.port == 0 {
        return Err(InstanceError::invalid("ssh.port", "must be 1-65535"));
    }
    Ok(())
}

/// The instance config GPUs need: the NVIDIA runtime, and the attachments recorded.
pub(crate) fn gpu_config(gpus: &[GpuAttachment]) -> [(&'static str, String); 3] {
    [
        ("nvidia.runtime", "true".into()),
        ("nvidia.driver.capabilities", "compute,utility".into()),
        (
            KEY_GPUS,
            serde_json::to_string(gpus).expect("GPU list serialises"),
        ),
    ]
}

/// One `cohort-gpu<i>` device per GPU, pinned by `pci` (a MIG instance by its parent's `pci`
/// and its `mig.uuid`).
pub(crate) fn gpu_devices(gpus: &[GpuAttachment]) -> Devices {
    let mut devices = Devices::new();
    for (i, gpu) in gpus.iter().enumerate() {
        let mut dev = crate::lxd::Device::new();
        dev.insert("type".into(), "gpu".into());
        if let Some(mig) = &gpu.mig_uuid {
            dev.insert("gputype".into(), "mig".into());
            dev.insert("mig.uuid".into(), mig.clone());
        } else {
            dev.insert("gputype".into(), "physical".into());
        }
        if let Some(pci) = &gpu.pci_address {
            dev.insert("pci".into(), pci.clone());
        }
        devices.insert(format!("{DEVICE_GPU_PREFIX}{i}"), dev);
    }
    devices
}

pub(crate) fn check_gpu(i: usize, gpu: &GpuAttachment) -> Result<(), InstanceError> {
    let field = format!("gpus[{i}]");
    if gpu.pci_address.is_none() && gpu.mig_uuid.is_none() {
        return Err(InstanceError::invalid(
            field,
            "needs pci_address or mig_uuid",
        ));
    }
    if let Some(pci) = &gpu.pci_address {
        let ok = pci.len() == 12
            && pci.bytes().enumerate().all(|(n, b)| match n {
                4 | 7 => b == b':',
                10 => b == b'.',
                _ => b.is_ascii_hexdigit() && !b.is_ascii_uppercase(),
            });
        if !ok {
            return Err(InstanceError::invalid(
                format!("{field}.pci_address"),
                format!("{pci:?} is not a PCI address like 0000:3b:00.0"),
            ));
        }
    }
    if gpu
        .memory_cap_bytes
        .is_some_and(|cap| cap < crate::guest::cuda_cap::MIN_CAP_BYTES)
    {
        return Err(InstanceError::invalid(
            format!("{field}.memory_cap_bytes"),
            "must be at least 64 MiB",
        ));
    }
    if let Some(mig) = &gpu.mig_uuid {
        let ok = mig.starts_with("MIG-")
            && mig[4..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'/');
        if !ok {
            return Err(InstanceError::invalid(
                format!("{field}.mig_uuid"),
                format!("{mig:?} is not a MIG uuid (MIG-...)"),
            ));
        }
    }
    Ok(())
}

/// Parses `NMiB`/`NGiB`-style sizes LXD stores back (for reading limits).
pub fn parse_size_mib(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().ok()?;
    let mib = match unit {
        "MiB" | "MB" => n,
        "GiB" | "GB" => n.checked_mul(1024)?,
        "TiB" | "TB" => n.checked_mul(1024 * 1024)?,
        "KiB" | "kB" => n / 1024,
        "" | "B" => n / (1024 * 1024),
        _ => return None,
    };
    Some(mib)
}
