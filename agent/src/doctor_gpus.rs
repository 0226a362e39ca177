//! `cohort-agent doctor`'s GPU findings beyond NVML itself: the NVIDIA container toolkit (which
//! `nvidia.runtime` needs and Debian does not ship: the fix names NVIDIA's repository and the
//! package), persistence mode (`nvidia-smi`: without it the driver is torn down and set up again
//! between students' processes), and MIG (each card's mode and instances; a card in MIG mode with
//! no instances gives nothing to the scheduler).

use std::path::Path;
use std::process::Command;

use cohort_proto::agent::GpuInventory;

use crate::doctor::{check, Check, Level};

/// What to run where the toolkit is missing (Debian and Ubuntu).
pub const TOOLKIT_FIX: &str = "add NVIDIA's repository: curl -fsSL https://nvidia.github.io/libnvidia-container/gpgkey | gpg --dearmor -o /usr/share/keyrings/nvidia-container-toolkit.gpg; echo 'deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /' > /etc/apt/sources.list.d/nvidia-container-toolkit.list; then apt-get update && apt-get install nvidia-container-toolkit";

/// The toolkit check: `nvidia-container-cli` found at `found`, or not.
pub fn toolkit(found: Option<&Path>, gpus: usize) -> Check {
    match found {
        Some(p) => check(
            "NVIDIA container toolkit",
            Level::Ok,
            p.display().to_string(),
            "",
        ),
        None => check(
            "NVIDIA container toolkit",
            if gpus > 0 { Level::Fail } else { Level::Warn },
            "nvidia-container-cli not on PATH: nvidia.runtime cannot work, no GPU containers here",
            TOOLKIT_FIX,
        ),
    }
}

/// Persistence mode of every card, from `nvidia-smi` at `smi` (one line a card: `Enabled` or
/// `Disabled`); nothing to say on a node without GPUs.
pub fn persistence(inv: &GpuInventory, smi: Option<&Path>) -> Option<Check> {
    if inv.gpus.is_empty() {
        return None;
    }
    let Some(smi) = smi else {
        return Some(check(
            "persistence mode",
            Level::Warn,
            "nvidia-smi not on PATH: cannot tell",
            "install the driver's nvidia-smi",
        ));
    };
    let out = Command::new(smi)
        .args([
            "--query-gpu=index,persistence_mode",
            "--format=csv,noheader",
        ])
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
        Err(e) => e.to_string(),
    };
    let off: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_end().ends_with("Disabled"))
        .map(|l| l.split(',').next().unwrap_or("?").trim())
        .collect();
    let on = text
        .lines()
        .filter(|l| l.trim_end().ends_with("Enabled"))
        .count();
    Some(if off.is_empty() && on > 0 {
        check(
            "persistence mode",
            Level::Ok,
            format!("on, {on} GPU(s)"),
            "",
        )
    } else if off.is_empty() {
        check(
            "persistence mode",
            Level::Warn,
            format!("nvidia-smi said: {}", text.trim()),
            "run nvidia-smi -pm 1",
        )
    } else {
        check(
            "persistence mode",
            Level::Warn,
            format!("off on GPU(s) {}", off.join(", ")),
            "enable the nvidia-persistenced service, or run nvidia-smi -pm 1",
        )
    })
}

/// MIG: each card's mode and instances.
pub fn mig(inv: &GpuInventory) -> Option<Check> {
    if inv.gpus.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    let mut empty = Vec::new();
    for g in &inv.gpus {
        if !g.mig_enabled {
            parts.push(format!("GPU {}: off", g.index));
        } else if g.mig_devices.is_empty() {
            parts.push(format!("GPU {}: on, no instances", g.index));
            empty.push(g.index.to_string());
        } else {
            parts.push(format!(
                "GPU {}: on, {} instance(s)",
                g.index,
                g.mig_devices.len()
            ));
        }
    }
    let detail = parts.join("; ");
    Some(if empty.is_empty() {
        check("MIG", Level::Ok, detail, "")
    } else {
        check(
            "MIG",
            Level::Warn,
            detail,
            format!(
                "GPU(s) {} are in MIG mode without instances: create them (nvidia-smi mig -cgi <profiles> -C) or turn MIG off (nvidia-smi -mig 0)",
                empty.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_proto::agent::{Gpu, MigDevice};

    fn gpu(index: u32, mig: bool, instances: usize) -> Gpu {
        Gpu {
            uuid: format!("GPU-{index}"),
            index,
            name: "card".into(),
            memory_total_bytes: 1 << 30,
            memory_used_bytes: 0,
            pci_address: "0000:3b:00.0".into(),
            utilization_percent: None,
            mig_enabled: mig,
            mig_devices: (0..instances)
                .map(|i| MigDevice {
                    uuid: format!("MIG-{i}"),
                    index: i as u32,
                    name: "1g.5gb".into(),
                    memory_total_bytes: 5 << 30,
                })
                .collect(),
            temperature_celsius: None,
            power_milliwatts: None,
            processes: Vec::new(),
        }
    }

    #[test]
    fn mig_on_without_instances_is_a_warning_with_the_commands() {
        let inv = GpuInventory {
            unavailable: None,
            driver_version: None,
            gpus: vec![gpu(0, true, 2), gpu(1, false, 0), gpu(2, true, 0)],
            instances: Vec::new(),
        };
        let c = mig(&inv).expect("GPUs: a finding");
        assert_eq!(c.level, Level::Warn);
        assert!(
            c.detail.contains("GPU 0: on, 2 instance(s)"),
            "{}",
            c.detail
        );
        assert!(c.detail.contains("GPU 1: off"), "{}", c.detail);
        assert!(
            c.fix.contains("GPU(s) 2 ") && c.fix.contains("nvidia-smi mig -cgi"),
            "{}",
            c.fix
        );
        let none = GpuInventory {
            unavailable: None,
            driver_version: None,
            gpus: vec![],
            instances: Vec::new(),
        };
        assert!(mig(&none).is_none() && persistence(&none, None).is_none());
    }

    #[test]
    fn a_missing_toolkit_fails_where_there_are_gpus_and_names_the_package() {
        let c = toolkit(None, 2);
        assert_eq!(c.level, Level::Fail);
        assert!(c.fix.contains("apt-get install nvidia-container-toolkit"));
        assert_eq!(toolkit(None, 0).level, Level::Warn);
    }
}
