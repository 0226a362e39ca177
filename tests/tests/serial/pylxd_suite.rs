//! pylxd's own integration suite (the `integration/` folder of its source distribution on PyPI,
//! at the version scripts/setup installs and fetched by it) against Cohort's LXD-style API.
//! Only how the suite connects is adapted (tests/pylxd/connect_to_cohort.py, loaded as
//! `sitecustomize`); its tests and assertions run as they are. Every test passes but those
//! Cohort refuses by design ([`REFUSED`]) and those it does not do yet ([`NOT_YET`]), each with
//! why; a listed test that starts passing fails this test too, so the lists stay true. The
//! suite makes a container from a fresh image in most of its tests: about 4 minutes here.

use crate::cli_support;

use std::collections::BTreeMap;
use std::process::Command;

use cli_support::{token_of, Lxc, OneNode};

/// Where scripts/setup unpacks the suite.
const SUITE: &str = "/opt/cohort-pylxd/src/pylxd-2.4.2";

/// The suite's tests that Cohort refuses by design, and why (docs/lxd-clients.md says the
/// same): a test whose id contains the first part.
const REFUSED: &[(&str, &str)] = &[
    (
        "test_networks.py::",
        "networks are each node's own, made by cohort-agent: listed read-only",
    ),
    (
        "test_storage.py::",
        "storage pools and volumes are each node's own (homes are Cohort's): listed read-only",
    ),
    (
        "test_profiles.py::",
        "Cohort's placement, limits and devices take the place of profiles",
    ),
    (
        "test_projects.py::",
        "Cohort's projects are its courses, made with cohort course create",
    ),
    (
        "TestContainer::test_save",
        "limits.cpu is placement's: an instance's cores are set when it is placed (at create, or \
         for a course's containers by cohort course limits), never by PUT on one instance",
    ),
    (
        "TestContainer::test_rename",
        "the name is an instance's identity (home volume, SSH endpoint, roster, audit log)",
    ),
];

/// The suite's tests that still fail for something Cohort does not do yet (the issue keeps
/// them open), and why: a test here that starts passing must move out of the list.
const NOT_YET: &[(&str, &str)] = &[];

/// Each test of the suite and how it ended (PASSED, FAILED, ERROR, SKIPPED), from pytest's
/// `-rA` summary.
fn outcomes(summary: &str) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    for line in summary.lines() {
        let Some((state, rest)) = line.split_once(' ') else {
            continue;
        };
        if !matches!(state, "PASSED" | "FAILED" | "ERROR") {
            continue;
        }
        let test = rest.split(" - ").next().unwrap_or(rest).trim();
        seen.insert(test.to_string(), state.to_string());
    }
    seen
}

#[test]
fn pylxds_own_integration_suite_passes_but_for_documented_refusals() {
    // Alone: its 68 tests import images and make containers one after another for four minutes,
    // load that starved the parallel tests' nodes and browsers.
    let _alone = crate::alone_blocking();
    let suite = std::path::Path::new(SUITE);
    assert!(
        suite.join("integration").is_dir(),
        "{SUITE}/integration is missing: run scripts/setup, which fetches pylxd's source"
    );
    let node = OneNode::start_with_lxd_api();
    let cli = &node.cli;
    let lxc = Lxc::trusted_by(cli, "pylxd-suite", None);
    // The suite's own `authenticate(token)` tests redeem this.
    let token = token_of(&cli.ok(&["config", "trust", "add", "pylxd-token"]));
    let address = node.controller.lxd_address.clone().expect("LXD-style API");
    let shim = tempfile::tempdir().expect("dir");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pylxd/connect_to_cohort.py"),
        shim.path().join("sitecustomize.py"),
    )
    .expect("the connection shim");
    // A certificate no one trusted yet, for the suite's clients that redeem the token.
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"])
        .args(["-subj", "/CN=pylxd-suite-new", "-keyout"])
        .arg(shim.path().join("new.key"))
        .arg("-out")
        .arg(shim.path().join("new.crt"))
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "{made:?}");
    let out = Command::new(cohort_e2e::lxd::pylxd_python())
        .args([
            "-m",
            "pytest",
            "integration",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--durations=25",
        ])
        // The project's own pytest options (coverage) are for its unit tests, not this run.
        .args(["-o", "addopts="])
        .current_dir(suite)
        .env("PYTHONPATH", shim.path())
        .env("COHORT_LXD_ENDPOINT", format!("https://{address}"))
        .env("COHORT_LXD_CERT", lxc.conf.path().join("client.crt"))
        .env("COHORT_LXD_KEY", lxc.conf.path().join("client.key"))
        .env(
            "COHORT_LXD_SERVER_CERT",
            lxc.conf.path().join("servercerts/lab.crt"),
        )
        .env("COHORT_LXD_NEW_CERT", shim.path().join("new.crt"))
        .env("COHORT_LXD_NEW_KEY", shim.path().join("new.key"))
        .env("LXD_TOKEN", &token)
        .env("HOME", lxc.conf.path())
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .output()
        .expect("run pylxd's integration suite");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // pytest's slowest steps, for `--nocapture` runs that look for where the time goes.
    println!("{stdout}");
    let seen = outcomes(&stdout);
    assert!(seen.len() > 50, "the suite ran too few tests: {stdout}");
    let expected_to_fail = |test: &str| {
        REFUSED
            .iter()
            .chain(NOT_YET)
            .any(|(pattern, _)| test.contains(pattern))
    };
    let wrong: Vec<String> = seen
        .iter()
        .filter(|(test, state)| (state.as_str() == "PASSED") == expected_to_fail(test))
        .map(|(test, state)| format!("{test}: {state}"))
        .collect();
    for (pattern, why) in REFUSED.iter().chain(NOT_YET) {
        assert!(
            seen.keys().any(|test| test.contains(pattern)),
            "no test of the suite is {pattern} ({why}): the list is stale\n{stdout}"
        );
    }
    assert!(
        wrong.is_empty(),
        "tests that should pass and did not, or refusals that passed:\n{}\n{stdout}",
        wrong.join("\n")
    );
}
