//! `cohort-agent doctor` on a GPU node, with the test NVML library standing in for the driver
//! (two cards: an A100 in MIG mode with two instances and an L40S) and no NVIDIA container
//! toolkit on PATH: the MIG finding lists both cards, the missing toolkit is a FAIL that says
//! what to install from NVIDIA's repository, and persistence mode cannot be told without
//! nvidia-smi.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn doctor_on_a_gpu_node_without_the_toolkit_says_what_to_install() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lib = dir.path().join("libfake_nvml.so");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/fake_nvml.c");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
        .expect("run cc");
    assert!(built.success());
    let out = Command::new(env!("CARGO_BIN_EXE_cohort-agent"))
        .arg("doctor")
        .arg("--nvml-library")
        .arg(&lib)
        .env("COHORT_AGENT_NETWORK_MODE", "none")
        // One line a row: wide enough that doctor's table does not wrap.
        .env("COLUMNS", "400")
        // Only the system's tools: no nvidia-container-cli, no nvidia-smi on this machine.
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .expect("run cohort-agent doctor");
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no {name} row in:\n{table}"))
            .to_string()
    };
    assert_ne!(
        out.status.code(),
        Some(0),
        "a GPU node without the toolkit passed:\n{table}"
    );
    let toolkit = row("NVIDIA container toolkit");
    assert!(toolkit.contains("FAIL"), "{toolkit}");
    assert!(
        table.contains("apt-get install nvidia-container-toolkit")
            && table.contains("nvidia.github.io/libnvidia-container"),
        "{table}"
    );
    let mig = row("MIG");
    assert!(
        mig.contains("GPU 0: on, 2 instance(s)") && mig.contains("GPU 1: off"),
        "{mig}"
    );
    assert!(row("persistence mode").contains("WARN"), "{table}");
}
