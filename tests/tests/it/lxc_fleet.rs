//! The real `lxc` 5.0.2 client against Cohort's LXD-style API on a one-node deployment: it lists
//! the fleet as the node's own LXD lists the same containers, starts, stops and deletes through
//! Cohort's operations (waiting on them over the events websocket), and shows nodes, projects
//! and operations. What Cohort does not offer is refused LXD's way.

use crate::cli_support;

use cli_support::{Lxc, OneNode};
use serde_json::Value;

fn sorted(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn lxc_lists_and_drives_the_fleet() {
    let node = OneNode::start_with_lxd_api();
    let (lxd, cli) = (&node.lxd, &node.cli);
    for (verb, name) in [("launch", "web1"), ("init", "db-2")] {
        cli.ok(&[
            "-q",
            verb,
            "cohort/base",
            name,
            "-c",
            "limits.memory=256MiB",
        ]);
    }
    let lxc = Lxc::trusted_by(cli, "admin-laptop", None);

    // The same rows as the node's own LXD, in csv and with the location column.
    let ours = lxc.ok(&["list", "lab:", "-f", "csv", "-c", "ns"]);
    assert_eq!(
        sorted(&ours),
        sorted(&lxd.lxc(&["list", "-f", "csv", "-c", "ns"]))
    );
    assert_eq!(sorted(&ours), ["db-2,STOPPED", "web1,RUNNING"]);
    let located = lxc.ok(&["list", "lab:", "-f", "csv", "-c", "nL"]);
    assert_eq!(sorted(&located), ["db-2,node1", "web1,node1"]);
    let all = lxc.ok(&["list", "lab:", "--all-projects", "-f", "csv", "-c", "ns"]);
    assert_eq!(sorted(&all), ["db-2,STOPPED", "web1,RUNNING"]);
    let table = lxc.ok(&["list", "lab:"]);
    assert!(
        table.contains("| web1 ") && table.contains("RUNNING"),
        "{table}"
    );

    // JSON with LXD's field names and values.
    let listed: Vec<Value> =
        serde_json::from_str(&lxc.ok(&["list", "lab:", "-f", "json"])).unwrap();
    let web1 = listed.iter().find(|i| i["name"] == "web1").expect("web1");
    assert_eq!(web1["status"], "Running");
    assert_eq!(web1["type"], "container");
    assert_eq!(web1["location"], "node1");
    assert_eq!(web1["project"], "default");
    assert_eq!(web1["state"]["status"], "Running");

    // Changes go through Cohort's operations; lxc waits on them through the events websocket.
    lxc.ok(&["stop", "lab:web1"]);
    lxc.ok(&["start", "lab:db-2"]);
    let now = lxc.ok(&["list", "lab:", "-f", "csv", "-c", "ns"]);
    assert_eq!(sorted(&now), ["db-2,RUNNING", "web1,STOPPED"]);
    assert_eq!(
        sorted(&lxd.lxc(&["list", "-f", "csv", "-c", "ns"])),
        ["db-2,RUNNING", "web1,STOPPED"]
    );
    let ops = lxc.ok(&["operation", "list", "lab:", "-f", "csv"]);
    assert!(
        ops.lines().filter(|l| l.contains("SUCCESS")).count() >= 2,
        "{ops}"
    );
    let id = ops
        .lines()
        .next()
        .and_then(|l| l.split(',').next())
        .unwrap();
    assert!(lxc
        .ok(&["operation", "show", &format!("lab:{id}")])
        .contains("status: Success"));

    // A running instance is refused without -f; with -f it is stopped and deleted.
    lxc.fails(&["delete", "lab:db-2"], "stop");
    lxc.ok(&["delete", "-f", "lab:db-2"]);
    assert_eq!(
        lxc.ok(&["list", "lab:", "-f", "csv", "-c", "n"]).trim(),
        "web1"
    );

    // `info` and the image list.
    let info = lxc.ok(&["info", "lab:web1"]);
    assert!(
        info.contains("Name: web1") && info.contains("Status: STOPPED"),
        "{info}"
    );
    assert!(info.contains("Location: node1"), "{info}");
    let images = lxc.ok(&["image", "list", "lab:", "-f", "csv", "-c", "l"]);
    assert_eq!(images.trim(), "cohort/base");

    // Launched from the fleet's image, placed by Cohort on the node `--target` names.
    lxc.ok(&[
        "launch",
        "lab:cohort/base",
        "lab:web3",
        "--target",
        "node1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let launched = lxc.ok(&["list", "lab:web3", "-f", "csv", "-c", "nsL"]);
    assert_eq!(launched.trim(), "web3,RUNNING,node1");
    assert!(lxd
        .lxc(&["list", "-f", "csv", "-c", "ns"])
        .contains("web3,RUNNING"));
    lxc.fails(
        &["init", "lab:cohort/base", "lab:vm1", "--vm"],
        "Asked for a VM",
    );
    lxc.fails(
        &["init", "lab:cohort/base", "lab:x1", "--target", "nowhere"],
        "nowhere",
    );

    // Nodes are cluster members; courses projects.
    let members = lxc.ok(&["cluster", "list", "lab:", "-f", "csv"]);
    assert!(members.starts_with("node1,"), "{members}");
    assert!(members.contains("ONLINE"), "{members}");
    let projects = lxc.ok(&["project", "list", "lab:", "-f", "csv"]);
    assert!(projects.starts_with("default"), "{projects}");

    // Profiles are LXD's, not Cohort's; networks are each node's, listed read-only.
    lxc.fails(&["profile", "list", "lab:"], "Not supported by Cohort");
    let networks = lxc.ok(&["network", "list", "lab:", "-f", "csv"]);
    let names: Vec<&str> = networks
        .lines()
        .filter_map(|l| l.split(',').next())
        .collect();
    assert_eq!(names, ["node1"], "{networks}");
    lxc.fails(
        &["network", "create", "lab:extra"],
        "Not supported by Cohort",
    );
}
