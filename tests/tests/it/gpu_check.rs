//! `scripts/gpu-check`, the one-run proof of the GPU path on a real GPU server, run here in its
//! `--fake` mode (the test NVML library and the test libcuda) against the real `cohort-agent`
//! binary, so it cannot rot: it must pass, and it must fail when the cap does nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cohort_e2e::cluster::agent_binary;

fn gpu_check(agent: &Path) -> Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/gpu-check");
    Command::new("python3")
        .arg(script)
        .args(["--fake", "--load-seconds", "2", "--agent"])
        .arg(agent)
        .output()
        .expect("run scripts/gpu-check")
}

#[test]
fn gpu_check_passes_against_the_fakes() {
    let started = std::time::Instant::now();
    let out = gpu_check(&agent_binary());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "gpu-check failed:\n{table}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for row in [
        "gpu 0 uuid",
        "gpu 1 PCI",
        "gpu 0 driver",
        "load: agent sees its pid",
        "load: its memory",
        "after the load: GPU idle",
        "idle context: GPU idle",
        "cap 1 GiB: allocate 2 GiB",
        "cap 1 GiB: mem_get_info total",
        "MIG instances",
    ] {
        assert!(table.contains(row), "no {row:?} row in:\n{table}");
    }
    assert!(!table.contains("FAIL"), "{table}");
    eprintln!("gpu-check --fake: {:?}", started.elapsed());
}

/// An agent whose cap library caps nothing: the check must see it and exit non-zero.
#[test]
fn gpu_check_fails_when_the_cap_caps_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = dir.path().join("empty.c");
    std::fs::write(&empty, "int cohort_nothing;\n").expect("write");
    let wrapper = dir.path().join("cohort-agent");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nif [ \"$1\" = cap-library ]; then exec cc -shared -fPIC -o \"$2\" {}; fi\nexec {} \"$@\"\n",
            empty.display(),
            agent_binary().display()
        ),
    )
    .expect("write wrapper");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let out = gpu_check(&wrapper);
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{table}");
    let cap_rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("cap 1 GiB"))
        .collect();
    assert_eq!(cap_rows.len(), 3, "{table}");
    assert!(
        cap_rows.iter().any(|l| l.ends_with("FAIL")),
        "an uncapped library passed:\n{table}"
    );
}
