//! Issue 46: deleting a catalog image (`lxc image delete`, as pylxd's cleanup does) takes its
//! copy and alias off each node that held it, as a `drop_image` operation, once no container
//! uses it; while one does, the delete is refused and the node's copy stays.

use std::time::{Duration, Instant};

use crate::cli_support::{add_ssh_key, base_image_tarball, Agent, Cli, Controller, Lxc};
use cohort_e2e::TestLxd;

/// The fingerprints and aliases the node's own LXD project holds.
fn held(lxd: &TestLxd) -> String {
    lxd.lxc(&["image", "list", "-f", "csv", "-c", "Fl"])
}

#[test]
fn a_deleted_catalog_image_leaves_no_copy_on_its_node() {
    let controller = Controller::start_with_lxd_api();
    let cli = Cli::admin_of(&controller);
    // Images of its own, so the node's copy is the only one the test looks at; declared
    // before the agent, so the agent stops before its project goes.
    let lxd = TestLxd::with_own_images();
    let _agent = Agent::join(&controller, &cli, &lxd, "node1");
    let started = Instant::now();
    while !cli.ok(&["cluster", "list", "-f", "csv"]).lines().any(|l| {
        let cols: Vec<&str> = l.split(',').collect();
        cols.get(2) == Some(&"ONLINE") && cols.get(4).is_some_and(|c| *c != "0")
    }) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "node1 never came online with its capacity"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    add_ssh_key(&cli);
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
    assert_eq!(held(&lxd), "", "the project starts without images");

    let lxc = Lxc::trusted_by(&cli, "drop", None);
    lxc.ok(&[
        "launch",
        "lab:cohort/base",
        "lab:web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let copy = held(&lxd);
    assert!(
        copy.contains(&fingerprint) && copy.contains("cohort/base"),
        "the create did not bring the image to node1: {copy:?}"
    );

    // In use: refused, and the node keeps its copy.
    lxc.fails(
        &["image", "delete", &format!("lab:{fingerprint}")],
        "used by",
    );
    assert_eq!(held(&lxd), copy);

    lxc.ok(&["delete", "-f", "lab:web1"]);
    let started = Instant::now();
    while !lxc.ok(&["list", "lab:", "-f", "csv", "-c", "n"]).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "web1 was never deleted"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    lxc.ok(&["image", "delete", &format!("lab:{fingerprint}")]);
    assert_eq!(lxc.ok(&["image", "list", "lab:", "-f", "csv"]), "");
    let started = Instant::now();
    loop {
        let left = held(&lxd);
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "node1 still holds the deleted image after 60 s: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let ops = cli.ok(&["operation", "list", "-f", "csv"]);
    let id = ops
        .lines()
        .find(|l| l.contains(",drop_image,cohort/base,"))
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("no drop_image operation: {ops}"))
        .to_string();
    cli.ok(&["-q", "operation", "wait", &id]);
    let op: serde_json::Value =
        serde_yaml::from_str(&cli.ok(&["operation", "show", &id])).expect("operation as YAML");
    assert_eq!(op["status"], "success", "{op}");
    assert_eq!(op["items"][0]["target"], "node1", "{op}");
    // Nothing of it is left in the catalog either.
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    assert_eq!(listed, "", "{listed}");
}
