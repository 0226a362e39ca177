//! The agent's real NVML code against the test NVML library (agent/testdata/fake_nvml.c, built
//! here with `cc`): two GPUs, one in MIG mode with two MIG devices; and `cohort-agent gpus` on
//! this machine, which has no GPU.

use std::path::PathBuf;
use std::process::Command;

/// Compiles the test NVML library into a temp dir and returns its path (with the dir guard).
fn fake_nvml() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = dir.path().join("libfake_nvml.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/fake_nvml.c");
    let out = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
        .expect("run cc (install gcc; scripts/setup does)");
    assert!(
        out.status.success(),
        "cc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, lib)
}

fn agent(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cohort-agent"))
        .args(args)
        .env_remove("COHORT_AGENT_NVML_LIBRARY")
        .output()
        .expect("run cohort-agent")
}

#[test]
fn inventory_reads_two_gpus_and_mig_devices_through_nvml() {
    let (_dir, lib) = fake_nvml();
    let inv = cohort_agent::gpu::inventory(Some(&lib));
    assert_eq!(inv.unavailable, None);
    assert_eq!(inv.driver_version.as_deref(), Some("550.54.15-fake"));
    assert_eq!(inv.gpus.len(), 2);

    let a100 = &inv.gpus[0];
    assert_eq!(a100.index, 0);
    assert_eq!(a100.name, "NVIDIA A100-SXM4-40GB");
    assert_eq!(a100.uuid, "GPU-0f1e2d3c-0000-4000-8000-00000000a100");
    assert_eq!(a100.pci_address, "0000:3b:00.0");
    assert_eq!(a100.memory_total_bytes, 40 << 30);
    assert_eq!(a100.memory_used_bytes, 1 << 30);
    assert_eq!(a100.utilization_percent, Some(37));
    assert!(a100.mig_enabled);
    let migs: Vec<(u32, &str, u64)> = a100
        .mig_devices
        .iter()
        .map(|m| (m.index, m.uuid.as_str(), m.memory_total_bytes))
        .collect();
    assert_eq!(
        migs,
        vec![
            (0, "MIG-4a3b1c2d-0000-4000-8000-000000000001", 20 << 30),
            (2, "MIG-4a3b1c2d-0000-4000-8000-000000000002", 10 << 30),
        ]
    );

    let l40s = &inv.gpus[1];
    assert_eq!((l40s.index, l40s.name.as_str()), (1, "NVIDIA L40S"));
    assert_eq!(l40s.pci_address, "0000:af:00.0");
    assert!(!l40s.mig_enabled && l40s.mig_devices.is_empty());
}

#[test]
fn gpus_command_lists_fake_gpus_as_table_and_json() {
    let (_dir, lib) = fake_nvml();
    let lib = lib.to_str().expect("utf-8 path");
    let table = agent(&["gpus", "--nvml-library", lib]);
    assert!(table.status.success());
    let text = String::from_utf8_lossy(&table.stdout);
    for want in [
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA L40S",
        "0000:3b:00.0",
        "0000:af:00.0",
        "MIG 3g.20gb",
        "MIG 2g.10gb",
        "MIG-4a3b1c2d-0000-4000-8000-000000000002",
        "enabled",
        "550.54.15-fake",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }

    let json = agent(&["gpus", "--format", "json", "--nvml-library", lib]);
    assert!(json.status.success());
    let inv: cohort_proto::agent::GpuInventory =
        serde_json::from_slice(&json.stdout).expect("gpus --format json is a GpuInventory");
    assert_eq!(inv.gpus.len(), 2);
    assert_eq!(inv.gpus[0].mig_devices.len(), 2);
}

#[test]
fn gpus_command_on_a_machine_without_nvml_gives_the_reason() {
    let out = agent(&["gpus", "--nvml-library", "/nonexistent/libnvidia-ml.so.1"]);
    assert!(out.status.success(), "no GPU is not an error");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("No GPUs: NVML could not be loaded from /nonexistent/libnvidia-ml.so.1"),
        "{text}"
    );
    let json = agent(&[
        "gpus",
        "--format",
        "json",
        "--nvml-library",
        "/nonexistent/x.so",
    ]);
    let inv: cohort_proto::agent::GpuInventory = serde_json::from_slice(&json.stdout).unwrap();
    assert!(inv.gpus.is_empty());
    assert!(inv.unavailable.unwrap().contains("/nonexistent/x.so"));
}
