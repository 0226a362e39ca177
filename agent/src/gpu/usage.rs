//! Each container's use of each GPU, for the controller's GPU-time accounting and idle
//! detection (issue 43). NVML gives utilisation per GPU always and per process on most GPUs
//! (`nvmlDeviceGetProcessUtilization`, which samples only processes above 0 %). A container
//! whose processes are a GPU's only ones is measured by the GPU's own figure (exact for an
//! exclusive GPU); on a shared GPU by its processes' samples summed; else unknown. Whether it
//! holds a CUDA context is whether it has a compute process at all: a context held at 0 % is
//! visible here as `processes > 0` with `utilization_percent == Some(0)`.

use std::collections::{BTreeMap, HashMap};

use cohort_proto::agent::{Gpu, InstanceGpu, InstanceGpuUse};
use nvml_wrapper::Device;

/// How far back per-process samples are averaged (NVML keeps a few seconds of them).
const SAMPLE_WINDOW_US: u64 = 10_000_000;

/// Per PID, its mean SM utilisation over the last [`SAMPLE_WINDOW_US`]; `None` where NVML does
/// not sample per process on this device (then a process's share is unknown, not 0).
pub fn process_utilization(device: &Device<'_>) -> Option<HashMap<u32, u32>> {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let samples = device
        .process_utilization_stats(now_us.saturating_sub(SAMPLE_WINDOW_US))
        .ok()?;
    let mut sums: HashMap<u32, (u64, u64)> = HashMap::new();
    for s in samples {
        let e = sums.entry(s.pid).or_default();
        e.0 += u64::from(s.sm_util.min(100));
        e.1 += 1;
    }
    Some(
        sums.into_iter()
            .map(|(pid, (sum, n))| (pid, (sum / n.max(1)) as u32))
            .collect(),
    )
}

/// Each attributed instance's use of `gpus`, in name order.
pub fn per_instance(gpus: &[Gpu]) -> Vec<InstanceGpuUse> {
    let mut by_instance: BTreeMap<&str, Vec<InstanceGpu>> = BTreeMap::new();
    for gpu in gpus {
        let mut mine: BTreeMap<&str, Vec<&cohort_proto::agent::GpuProcess>> = BTreeMap::new();
        for p in &gpu.processes {
            if let Some(name) = p.instance.as_deref() {
                mine.entry(name).or_default().push(p);
            }
        }
        // The GPU is one container's alone when every process on it is that container's.
        let alone = mine.len() == 1 && mine.values().all(|ps| ps.len() == gpu.processes.len());
        for (name, processes) in mine {
            let per_process: Option<u32> = processes
                .iter()
                .map(|p| p.utilization_percent)
                .sum::<Option<u32>>()
                .map(|u| u.min(100));
            let utilization_percent = if alone {
                gpu.utilization_percent.or(per_process)
            } else {
                per_process
            };
            by_instance.entry(name).or_default().push(InstanceGpu {
                uuid: gpu.uuid.clone(),
                utilization_percent,
                memory_used_bytes: processes.iter().filter_map(|p| p.used_memory_bytes).sum(),
                processes: processes.len() as u32,
            });
        }
    }
    by_instance
        .into_iter()
        .map(|(instance, gpus)| InstanceGpuUse {
            instance: instance.to_string(),
            gpus,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_proto::agent::GpuProcess;

    fn gpu(uuid: &str, util: Option<u32>, processes: Vec<GpuProcess>) -> Gpu {
        Gpu {
            uuid: uuid.into(),
            index: 0,
            name: "test".into(),
            memory_total_bytes: 1 << 30,
            memory_used_bytes: 0,
            pci_address: String::new(),
            utilization_percent: util,
            mig_enabled: false,
            mig_devices: vec![],
            temperature_celsius: None,
            power_milliwatts: None,
            processes,
        }
    }

    fn process(pid: u32, instance: Option<&str>, util: Option<u32>) -> GpuProcess {
        GpuProcess {
            pid,
            used_memory_bytes: Some(100),
            instance: instance.map(String::from),
            utilization_percent: util,
        }
    }

    #[test]
    fn an_exclusive_gpu_is_measured_by_its_own_figure_a_shared_one_per_process() {
        let gpus = vec![
            gpu(
                "g0",
                Some(80),
                vec![process(1, Some("a"), Some(10)), process(2, Some("a"), None)],
            ),
            gpu(
                "g1",
                Some(90),
                vec![
                    process(3, Some("a"), Some(30)),
                    process(4, Some("b"), Some(60)),
                ],
            ),
            gpu(
                "g2",
                Some(50),
                vec![process(5, Some("b"), None), process(6, None, None)],
            ),
        ];
        let use_ = per_instance(&gpus);
        assert_eq!(use_.len(), 2);
        let a = &use_[0];
        assert_eq!(a.instance, "a");
        assert_eq!(
            a.gpus[0].utilization_percent,
            Some(80),
            "alone on g0: the GPU's figure"
        );
        assert_eq!(a.gpus[0].processes, 2);
        assert_eq!(a.gpus[0].memory_used_bytes, 200);
        assert_eq!(
            a.gpus[1].utilization_percent,
            Some(30),
            "shared g1: its own samples"
        );
        let b = &use_[1];
        assert_eq!(b.gpus[0].utilization_percent, Some(60));
        // g2 shares with a host process and has no per-process samples: unknown.
        assert_eq!(b.gpus[1].utilization_percent, None);
    }
}
