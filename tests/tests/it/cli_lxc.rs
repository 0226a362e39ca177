//! The agreement test: on a one-node deployment (a real controller, a real agent in a
//! test LXD project) where Cohort created some instances, the real `lxc` and `cohort` agree:
//! `list --format csv -c ns` gives the same rows, `list --format json` has lxc's field names for
//! the facts both show, and `config show`'s keys are keys lxc shows too.

use crate::cli_support;

use cli_support::OneNode;
use serde_json::Value;

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn lxc_and_cohort_agree_on_a_one_node_deployment() {
    let node = OneNode::start();
    let (lxd, cli) = (&node.lxd, &node.cli);
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    cli.ok(&[
        "-q",
        "init",
        "cohort/base",
        "db-2",
        "-c",
        "limits.memory=256MiB",
    ]);

    let ours = cli.ok(&["list", "-f", "csv", "-c", "ns"]);
    let theirs = lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    assert_eq!(sorted_lines(&ours), sorted_lines(&theirs));
    assert_eq!(sorted_lines(&ours), ["db-2,STOPPED", "web1,RUNNING"]);

    let ours: Vec<Value> = serde_json::from_str(&cli.ok(&["list", "-f", "json"])).unwrap();
    let theirs: Vec<Value> = serde_json::from_str(&lxd.lxc(&["list", "-f", "json"])).unwrap();
    for name in ["web1", "db-2"] {
        let find = |all: &[Value]| {
            all.iter()
                .find(|i| i["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} listed"))
        };
        let (ours, theirs) = (find(&ours), find(&theirs));
        for field in ["name", "status", "type", "location", "config", "created_at"] {
            assert!(theirs.get(field).is_some(), "lxc has {field}");
            assert!(ours.get(field).is_some(), "cohort has {field}: {ours}");
        }
        for field in ["name", "status", "type"] {
            assert_eq!(ours[field], theirs[field], "{name}: {field}");
        }
    }

    let ours: Value = serde_yaml::from_str(&cli.ok(&["config", "show", "web1"])).unwrap();
    let theirs: Value = serde_yaml::from_str(&lxd.lxc(&["config", "show", "web1"])).unwrap();
    for key in ["config", "devices", "ephemeral", "stateful"] {
        assert!(
            theirs.get(key).is_some() && ours.get(key).is_some(),
            "{key}"
        );
    }
    // The same devices as LXD's own `config show` (the NIC, root disk, home, SSH proxy).
    let names = |doc: &Value| -> Vec<String> {
        let devices = doc["devices"].as_object().expect("a devices map");
        devices.keys().cloned().collect()
    };
    assert!(!names(&theirs).is_empty(), "{theirs}");
    assert_eq!(names(&ours), names(&theirs));
    let their_config = theirs["config"].as_object().expect("lxc config map");
    for (key, value) in ours["config"].as_object().expect("cohort config map") {
        assert!(their_config.contains_key(key), "lxc has config key {key}");
        if key == "limits.cpu" {
            assert_eq!(Some(value), their_config.get(key), "{key}");
        }
    }

    cli.ok(&["-q", "delete", "-f", "web1", "db-2"]);
    assert_eq!(lxd.lxc(&["list", "-f", "csv", "-c", "n"]), "");
}
