//! The GPU memory cap's test parts, built with the host's C compiler: the test libcuda
//! (`agent/testdata/fake_cuda.c`, the CUDA driver API over host memory, as `fake_nvml.c` is NVML)
//! and the probe (`native/cuda-cap/probe.c`) that reports what a process sees through each path
//! to the driver.

use std::path::{Path, PathBuf};
use std::process::Command;

fn cc(args: &[&std::ffi::OsStr]) {
    let out = Command::new("cc")
        .args(args)
        .output()
        .expect("run cc (scripts/setup installs gcc)");
    assert!(
        out.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Builds `dir/libcuda.so.1` (the test libcuda) and `dir/cuda-cap-probe` linked against it;
/// returns their paths.
pub fn build_fake_cuda_and_probe(dir: &Path) -> (PathBuf, PathBuf) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = dir.join("libcuda.so.1");
    let probe = dir.join("cuda-cap-probe");
    cc(&[
        "-shared".as_ref(),
        "-fPIC".as_ref(),
        "-O1".as_ref(),
        "-Wl,-soname,libcuda.so.1".as_ref(),
        "-o".as_ref(),
        lib.as_os_str(),
        root.join("agent/testdata/fake_cuda.c").as_os_str(),
    ]);
    let search = format!("-L{}", dir.display());
    cc(&[
        "-O1".as_ref(),
        "-o".as_ref(),
        probe.as_os_str(),
        root.join("native/cuda-cap/probe.c").as_os_str(),
        search.as_ref(),
        "-l:libcuda.so.1".as_ref(),
        "-ldl".as_ref(),
    ]);
    (lib, probe)
}

/// The probe's `key=value` lines.
pub fn probe_report(stdout: &str) -> std::collections::BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
