//! `cohort image distribute` against a real controller and agent: a node whose LXD project has
//! no images of its own fetches the catalog image ahead of any create, the catalog records it,
//! and a second distribution leaves that node alone; students and unknown aliases are refused.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::{base_image_tarball, Agent, Cli, Controller};
use cohort_e2e::TestLxd;

/// The aliases the project's LXD holds.
fn aliases(lxd: &TestLxd) -> Vec<String> {
    lxd.lxc(&["image", "list", "-f", "csv", "-c", "l"])
        .lines()
        .flat_map(|l| l.split(',').map(|a| a.trim().to_string()))
        .filter(|a| !a.is_empty())
        .collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn distribute_fetches_the_image_once_onto_a_node_that_lacks_it() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    // Declared before the agent, so the agent stops before its project goes.
    let lxd = TestLxd::with_own_images();
    let _agent = Agent::join(&controller, &cli, &lxd, "node1");
    let started = Instant::now();
    while !cli
        .ok(&["cluster", "list", "-f", "csv"])
        .lines()
        .any(|l| l.split(',').nth(2) == Some("ONLINE"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "node1 never came online"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let tarball = base_image_tarball();
    let imported = cli.ok(&[
        "image",
        "import",
        tarball.to_str().unwrap(),
        "--alias",
        "cohort/base",
    ]);
    let fingerprint = imported.trim().rsplit(' ').next().unwrap().to_string();
    assert_eq!(fingerprint.len(), 64, "{imported}");
    assert!(
        aliases(&lxd).is_empty(),
        "the project starts without images"
    );

    // A student may not; an alias the catalog lacks is not found; neither starts anything.
    cli.ok(&["user", "create", "stu", "--role", "student"]);
    let token = cli.ok(&["user", "token", "stu"]).trim().to_string();
    let student = Cli {
        conf: tempfile::tempdir().unwrap(),
    };
    student.ok(&[
        "remote",
        "add",
        "lab",
        &controller.url,
        "--token",
        &token,
        "--accept-certificate",
    ]);
    student.fails(&["image", "distribute", "cohort/base"], "instructor role");
    cli.fails(&["image", "distribute", "nope"], "image nope not found");
    assert_eq!(cli.ok(&["operation", "list", "-f", "csv"]), "");
    assert!(aliases(&lxd).is_empty(), "a refused distribution fetched");

    // A node that is not online is named with its state and left out: nothing is fetched.
    cli.ok(&["cluster", "evacuate", "node1", "--force"]);
    let out = cli.run(&["image", "distribute", "cohort/base"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).lines().next(),
        Some("node1: skipped (evacuating)"),
        "{}",
        stderr(&out)
    );
    assert!(
        aliases(&lxd).is_empty(),
        "an evacuated node fetched the image"
    );
    cli.ok(&["cluster", "restore", "node1", "--force"]);

    let out = cli.run(&["image", "distribute", "lab:cohort/base"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("node1: imported cohort/base"),
        "{}",
        stderr(&out)
    );
    assert_eq!(aliases(&lxd), ["cohort/base"]);
    let held = lxd.lxc(&["image", "list", "-f", "csv", "-c", "F"]);
    assert!(held.contains(&fingerprint), "{held}");
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("cohort/base,") && l.ends_with(",node1")),
        "the catalog does not record node1 as holding it: {listed}"
    );

    // Again: node1 is named as holding it and asked for nothing (an operation of no items).
    let out = cli.run(&["image", "distribute", "cohort/base", "--no-wait"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "node1: already holds cohort/base\n",
        "{}",
        stderr(&out)
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    cli.ok(&["-q", "operation", "wait", &id]);
    let op: serde_json::Value =
        serde_yaml::from_str(&cli.ok(&["operation", "show", &id])).expect("operation as YAML");
    assert_eq!(op["kind"], "distribute_image", "{op}");
    assert_eq!(op["status"], "success", "{op}");
    assert_eq!(op["items"], serde_json::json!([]), "{op}");
    assert_eq!(aliases(&lxd), ["cohort/base"]);
}
