//! Issue 46: pylxd's own integration suite, from its source distribution on PyPI at the version
//! scripts/setup installs (fetched here into the test target's scratch space, never copied into
//! this repository), against a one-node Cohort. tests/pylxd/run_suite.py adapts only how the
//! suite connects; tests/pylxd/suite-expectations.txt lists the tests Cohort refuses by design
//! (and any known failure) with why. Every other test must pass, and every listed one must still
//! fail, so the list never goes stale.

use crate::cli_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{token_of, Lxc, OneNode};
use serde_json::Value;

/// The pylxd scripts/setup installs, and its source distribution.
const PYLXD_VERSION: &str = "2.4.2";
const PYLXD_SDIST: &str = "https://files.pythonhosted.org/packages/5c/47/\
    91467f5d3cb9ec2f8e353aa9bb8c93e60949188dd845d02419b1788e9f63/pylxd-2.4.2.tar.gz";
const PYLXD_SHA256: &str = "759881fd94b6dda56ecde44ca1b7c0a7b478b4282ed950cff4f99e28cb207e3a";

/// Longest the whole suite may take.
const SUITE_LIMIT: Duration = Duration::from_secs(170);

/// The unpacked source distribution (fetched once per target directory, checked by SHA-256).
fn suite_root() -> PathBuf {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let root = scratch.join(format!("pylxd-{PYLXD_VERSION}"));
    if root.join("integration/testing.py").exists() {
        return root;
    }
    let tarball = scratch.join(format!("pylxd-{PYLXD_VERSION}.tar.gz"));
    let fetched = Command::new("curl")
        .args(["-sSfL", "--max-time", "120", "-o"])
        .arg(&tarball)
        .arg(PYLXD_SDIST)
        .status()
        .expect("run curl");
    assert!(fetched.success(), "fetching {PYLXD_SDIST} failed");
    use sha2::Digest;
    let digest = hex::encode(sha2::Sha256::digest(std::fs::read(&tarball).unwrap()));
    assert_eq!(digest, PYLXD_SHA256, "{PYLXD_SDIST} is not the release");
    let unpacked = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(scratch)
        .status()
        .expect("run tar");
    assert!(unpacked.success());
    root
}

/// `refused|known TEST_ID WHY` lines: the tests expected to fail, with why.
fn expectations() -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("pylxd/suite-expectations.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let kind = parts.next().unwrap();
            assert!(kind == "refused" || kind == "known", "{l}");
            let id = parts.next().expect("a test id").to_string();
            (id, format!("{kind}: {}", parts.next().unwrap_or_default()))
        })
        .collect()
}

#[test]
fn pylxd_integration_suite_passes_but_for_the_refusals() {
    let python = crate::pylxd::tools_python();
    let version = Command::new(&python)
        .args(["-c", "import pylxd; print(pylxd.__version__)"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        PYLXD_VERSION,
        "scripts/setup installs another pylxd than this test fetches the suite of"
    );
    let root = suite_root();
    let node = OneNode::start_with_lxd_api();
    let admin = Lxc::trusted_by(&node.cli, "pylxd-suite", None);
    let address = node.controller.lxd_address.clone().unwrap();

    // The certificate the suite's `authenticate` tests join with, trusted by no one yet.
    let home = tempfile::tempdir().unwrap();
    let lxc_dir = home.path().join(".config/lxc");
    std::fs::create_dir_all(&lxc_dir).unwrap();
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-384",
        ])
        .args([
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=pylxd-suite",
            "-keyout",
        ])
        .arg(lxc_dir.join("client.key"))
        .arg("-out")
        .arg(lxc_dir.join("client.crt"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let token = token_of(
        &node
            .cli
            .ok(&["config", "trust", "add", "pylxd-authenticate"]),
    );

    let log = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let mut child = Command::new(&python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("pylxd/run_suite.py"))
        .arg(format!("https://{address}"))
        .arg(admin.conf.path().join("client.crt"))
        .arg(admin.conf.path().join("client.key"))
        .arg(node.controller.state.path().join("server.crt"))
        .arg(&root)
        .env("HOME", home.path())
        .env("LXD_TOKEN", &token)
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("run the suite");
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > SUITE_LIMIT {
            let _ = child.kill();
            panic!(
                "the suite ran past {SUITE_LIMIT:?}: {}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let seen: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "{stdout}{}",
            std::fs::read_to_string(log.path()).unwrap_or_default()
        )
    });
    eprintln!("pylxd suite: {seen:#}\n({:?})", started.elapsed());

    let expected = expectations();
    let failed: BTreeMap<String, String> = serde_json::from_value(seen["failed"].clone()).unwrap();
    let unexpected: Vec<_> = failed
        .iter()
        .filter(|(id, _)| !expected.contains_key(*id))
        .collect();
    assert!(
        unexpected.is_empty(),
        "failed, and not listed: {unexpected:#?}"
    );
    let passed: Vec<String> = serde_json::from_value(seen["passed"].clone()).unwrap();
    let stale: Vec<_> = passed
        .iter()
        .filter(|id| expected.contains_key(*id))
        .collect();
    assert!(stale.is_empty(), "listed as failing, but passed: {stale:?}");
    assert!(passed.len() >= 10, "too few passed: {passed:?}");
}
