//! GPU inventory through NVML (nvml-wrapper): each GPU's uuid, index, name, memory, PCI address
//! in LXD's form, utilization and MIG devices. A node without NVML has an empty inventory with
//! the reason, never an error. Also whether the NVIDIA container tools LXD needs are present.
//! [`Gpus`] is the service the node holds; it reads NVML on one thread with a deadline
//! ([`reader`]). Each compute process is attributed to its container, and each container's use
//! of each GPU summed ([`usage`]) for the controller's GPU-time accounting.

pub mod attribution;
mod mig;
pub mod reader;
mod service;
pub mod usage;

use std::ffi::OsStr;
use std::path::Path;

use cohort_proto::agent::{Gpu, GpuInventory, GpuProcess};
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

pub use service::Gpus;

/// Library loaded when no path is configured (found through the dynamic loader).
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so";

/// The inventory from the NVML library at `library` (or the system's).
pub fn inventory(library: Option<&Path>) -> GpuInventory {
    let path: &OsStr = library.map_or(OsStr::new(DEFAULT_LIBRARY), Path::as_os_str);
    let nvml = match Nvml::builder().lib_path(path).init() {
        Ok(nvml) => nvml,
        Err(e) => {
            return GpuInventory {
                unavailable: Some(format!(
                    "NVML could not be loaded from {}: {e}",
                    path.to_string_lossy()
                )),
                driver_version: None,
                gpus: Vec::new(),
                instances: Vec::new(),
            }
        }
    };
    let mut problems = Vec::new();
    let count = nvml.device_count().unwrap_or_else(|e| {
        problems.push(format!("device count: {e}"));
        0
    });
    let mig_lib = mig::MigLibrary::open(path);
    let mut gpus = Vec::new();
    for index in 0..count {
        match nvml
            .device_by_index(index)
            .and_then(|d| describe(&nvml, &d, index, mig_lib.as_ref()))
        {
            Ok(gpu) => gpus.push(gpu),
            Err(e) => problems.push(format!("GPU {index}: {e}")),
        }
    }
    GpuInventory {
        unavailable: (!problems.is_empty()).then(|| problems.join("; ")),
        driver_version: nvml.sys_driver_version().ok(),
        gpus,
        instances: Vec::new(),
    }
}

fn describe(
    nvml: &Nvml,
    device: &Device<'_>,
    index: u32,
    mig_lib: Option<&mig::MigLibrary>,
) -> Result<Gpu, NvmlError> {
    let memory = device.memory_info()?;
    let pci = device.pci_info()?;
    let (mig_enabled, mig_devices) = match mig_lib {
        Some(lib) => lib.mig_devices(nvml, device)?,
        None => (false, Vec::new()),
    };
    Ok(Gpu {
        uuid: device.uuid()?,
        index: device.index().unwrap_or(index),
        name: device.name()?,
        memory_total_bytes: memory.total,
        memory_used_bytes: memory.used,
        pci_address: lxd_pci_address(&pci.bus_id),
        utilization_percent: device.utilization_rates().ok().map(|u| u.gpu),
        mig_enabled,
        mig_devices,
        temperature_celsius: device.temperature(TemperatureSensor::Gpu).ok(),
        power_milliwatts: device.power_usage().ok(),
        processes: {
            let sampled = usage::process_utilization(device);
            device
                .running_compute_processes()
                .unwrap_or_default()
                .into_iter()
                .map(|p| GpuProcess {
                    pid: p.pid,
                    used_memory_bytes: match p.used_gpu_memory {
                        UsedGpuMemory::Used(bytes) => Some(bytes),
                        UsedGpuMemory::Unavailable => None,
                    },
                    instance: None,
                    utilization_percent: sampled
                        .as_ref()
                        .map(|s| s.get(&p.pid).copied().unwrap_or(0)),
                })
                .collect()
        },
    })
}

/// Fills in each GPU process's instance: the one of `project` (among `instances`) whose cgroup
/// holds it.
pub fn attribute(inventory: &mut GpuInventory, project: &str, instances: &[String]) {
    let proc_root = Path::new("/proc");
    for gpu in &mut inventory.gpus {
        for p in &mut gpu.processes {
            p.instance = attribution::instance_of_pid(proc_root, p.pid, project, instances);
        }
    }
    inventory.instances = usage::per_instance(&inventory.gpus);
}

/// NVML's bus id (`00000000:3B:00.0`) in the form LXD's `pci` key takes (`0000:3b:00.0`).
pub fn lxd_pci_address(bus_id: &str) -> String {
    let lower = bus_id.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => lower,
    }
}

/// True when the NVIDIA container tools LXD's `nvidia.runtime` needs are on `PATH`
/// (`nvidia-container-cli`, from libnvidia-container-tools).
pub fn nvidia_runtime_available() -> bool {
    find_on_path("nvidia-container-cli").is_some()
}

/// The first executable named `name` on `PATH`.
pub fn find_on_path(name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_address_takes_lxd_form() {
        assert_eq!(lxd_pci_address("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(lxd_pci_address("0000:af:00.0"), "0000:af:00.0");
    }

    #[test]
    fn missing_library_is_a_reason_not_an_error() {
        let inv = inventory(Some(Path::new("/nonexistent/libnvidia-ml.so")));
        assert!(inv.gpus.is_empty());
        let why = inv.unavailable.expect("a reason");
        assert!(why.contains("/nonexistent/libnvidia-ml.so"), "{why}");
    }
}
