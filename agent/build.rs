//! Builds the GPU memory cap (`native/cuda-cap`, a C library preloaded into sharing containers)
//! with the system's C compiler (`$CC`, default `cc`) and hands its path to the agent, which
//! embeds it: the library a node installs is always the one built with its agent.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../native/cuda-cap/cuda_cap.c");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("libcohort_cuda_cap.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-Werror", "-o",
        ])
        .arg(&out)
        .arg(&src)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|e| panic!("running {cc} for native/cuda-cap (install gcc): {e}"));
    assert!(status.success(), "{cc} failed on {}", src.display());
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rustc-env=CUDA_CAP_LIBRARY_BUILT={}", out.display());
}
