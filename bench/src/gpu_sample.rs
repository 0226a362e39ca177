//! Issue 43's agent-side cost: one GPU sample as the agent takes it for each poll (NVML read
//! through the test NVML library, every compute process attributed to its container from
//! `/proc/<pid>/cgroup`, the per-container use summed), at `gpus` GPUs and `containers` busy
//! containers. Each container is a real cgroup named as liblxc names a container's
//! (`lxc.payload.<name>`) holding a real process, which the test NVML library reports on one of
//! the GPUs. Measured: this process's CPU time per sample, and what that is as a share of one
//! core at the agent's poll interval.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

use crate::api::cpu_seconds;

pub struct Outcome {
    pub samples: u32,
    pub cpu_ms_per_sample: f64,
    pub attributed: usize,
}

/// The containers' cgroups and processes, removed on drop.
struct Containers {
    groups: Vec<PathBuf>,
    children: Vec<Child>,
}

impl Drop for Containers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        for g in &self.groups {
            let _ = std::fs::remove_dir(g);
        }
    }
}

fn containers(n: u32) -> Result<(Containers, Vec<String>)> {
    // cgroup v2's single tree, or v1's `pids` hierarchy (what this machine has): liblxc names
    // the container's group the same in each, and attribution reads it from any line.
    let v2 = Path::new("/sys/fs/cgroup");
    let root = if v2.join("cgroup.controllers").exists() {
        v2.to_path_buf()
    } else {
        v2.join("pids")
    };
    ensure!(
        root.join("cgroup.procs").exists(),
        "no cgroup tree at {} (v2) or its pids hierarchy (v1)",
        v2.display()
    );
    let mut made = Containers {
        groups: Vec::new(),
        children: Vec::new(),
    };
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("gpu-bench-{i:03}");
        let group = root.join(format!("lxc.payload.{name}"));
        std::fs::create_dir_all(&group).with_context(|| format!("mkdir {}", group.display()))?;
        made.groups.push(group.clone());
        let child = Command::new("sleep").arg("600").spawn().context("sleep")?;
        std::fs::write(group.join("cgroup.procs"), child.id().to_string())
            .context("move the process into its container's cgroup")?;
        made.children.push(child);
        names.push(name);
    }
    Ok((made, names))
}

pub fn run(gpus: u32, n: u32, samples: u32) -> Result<Outcome> {
    let dir = tempfile::tempdir()?;
    let lib = cohort_e2e::observe::build_fake_nvml(dir.path());
    let (made, names) = containers(n)?;
    // Each container's process on one GPU, round robin, with memory and an SM share.
    let procs: String = made
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "{} {} {} {}\n",
                i as u32 % gpus,
                c.id(),
                1u64 << 30,
                10 + i % 50
            )
        })
        .collect();
    let file = dir.path().join("processes");
    std::fs::write(&file, procs)?;
    std::env::set_var("FAKE_NVML_PROCESSES", &file);
    std::env::set_var("FAKE_NVML_COUNT", gpus.to_string());
    std::env::set_var("FAKE_NVML_ALL_MIG", "0");

    let sample = || {
        let mut inv = cohort_agent::gpu::inventory(Some(&lib));
        cohort_agent::gpu::attribute(&mut inv, "default", &names);
        inv
    };
    let first = sample();
    ensure!(
        first.gpus.len() as u32 == gpus,
        "the test NVML library gave {} GPUs, not {gpus}",
        first.gpus.len()
    );
    let attributed = first.instances.len();
    ensure!(
        attributed == n as usize,
        "{attributed} of {n} containers attributed"
    );
    let me = std::process::id();
    let cpu0 = cpu_seconds(me).context("own CPU")?;
    let start = Instant::now();
    for _ in 0..samples {
        std::hint::black_box(sample());
    }
    let cpu1 = cpu_seconds(me).context("own CPU")?;
    ensure!(start.elapsed() < Duration::from_secs(600), "too slow");
    drop(made);
    Ok(Outcome {
        samples,
        cpu_ms_per_sample: (cpu1 - cpu0) * 1000.0 / f64::from(samples),
        attributed,
    })
}
