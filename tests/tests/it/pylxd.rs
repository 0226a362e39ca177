//! pylxd, the Python library for LXD (from PyPI, in a virtualenv scripts/setup makes),
//! against Cohort's LXD-style API with a certificate trusted through `cohort config trust add`:
//! listing and getting instances, a missing one, `execute` (stdout, stderr, exit code), files
//! pushed and pulled, an instance created, started, stopped and deleted through Cohort's
//! scheduler, and LXD's own refusal for what Cohort does not offer. The calls are made by
//! tests/pylxd/scenario.py; what they returned is asserted here.

use crate::cli_support;

use std::process::Command;

use cli_support::{Lxc, OneNode};
use serde_json::{json, Value};

#[test]
fn pylxd_works_against_the_fleet() {
    let node = OneNode::start_with_lxd_api();
    let cli = &node.cli;
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let lxc = Lxc::trusted_by(cli, "notebook-server", None);
    let address = node.controller.lxd_address.clone().expect("LXD-style API");
    let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pylxd/scenario.py");
    let out = Command::new(cohort_e2e::lxd::pylxd_python())
        .arg(&scenario)
        .arg(format!("https://{address}"))
        .arg(lxc.conf.path().join("client.crt"))
        .arg(lxc.conf.path().join("client.key"))
        .arg(lxc.conf.path().join("servercerts/lab.crt"))
        // pylxd reads server certificates from ~/.config/lxc: none but this test's.
        .env("HOME", lxc.conf.path())
        // requests lets these override the certificate pylxd is given to pin.
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .output()
        .expect("run the pylxd scenario");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the scenario failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}"));

    assert_eq!(seen["trusted"], true, "{seen}");
    assert_eq!(seen["all"], json!(["web1"]), "{seen}");
    assert_eq!(
        seen["get"],
        json!({"status": "Running", "memory": "256MiB"}),
        "{seen}"
    );
    assert_eq!(seen["missing"], "NotFound", "{seen}");
    assert_eq!(
        seen["execute"],
        json!({"exit_code": 3, "stdout": "out\n", "stderr": "err\n"}),
        "{seen}"
    );
    assert_eq!(
        seen["files"],
        json!({"content": "written by pylxd\n", "mode": "640"}),
        "{seen}"
    );
    assert_eq!(
        seen["lifecycle"],
        json!({"created": "Stopped", "started": "Running", "hostname": "py1",
               "stopped": "Stopped", "after_delete": ["web1"]}),
        "{seen}"
    );
    let refused = seen["profiles"]["refused"].as_str().unwrap_or_default();
    assert!(refused.to_lowercase().contains("not supported"), "{seen}");
    // What pylxd made through Cohort is on the node's LXD, and what it deleted is gone.
    assert_eq!(node.lxd.instance_names(), vec!["web1".to_string()]);
}
