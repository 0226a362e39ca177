//! The table of what the real `lxc` 5.0.2 does through Cohort's `/1.0` (cli/README.md,
//! "The real `lxc` against Cohort") kept true: every row has a check here and every check a row;
//! the verbs of each "works" row run against a real controller and node and do what they say,
//! and those of a "refused" row fail with an `Error:` line.

use crate::cli_support;

use cli_support::{Lxc, OneNode};

const README: &str = include_str!("../../../cli/README.md");

/// The table's rows: (first cell, second cell).
fn rows() -> Vec<(String, String)> {
    let section = README
        .split("## The real `lxc` against Cohort")
        .nth(1)
        .expect("the README's /1.0 section");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| lxc verb"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 2, "a row of two cells: {l}");
            (cells[0].trim().to_string(), cells[1].trim().to_string())
        })
        .collect()
}

/// What one row's check runs; it panics when the row does not hold.
type Check = fn(&Lxc, &OneNode);

/// The checks in the order they run (later ones use what earlier ones made), each under the
/// first cell of its row.
const CHECKS: &[(&str, Check)] = &[
    ("`remote add REMOTE TOKEN`", remote_add),
    (
        "`launch`, `init` (`--target`, `-c limits.cpu/limits.memory`)",
        launch_init,
    ),
    (
        "`list` (formats, `-c`, `--all-projects`, `--project COURSE`)",
        list,
    ),
    (
        "`info`, `image list`, `operation list/show`, `cluster list`, `project list`",
        info_and_lists,
    ),
    (
        "`exec` (non-interactive, or `-t` with a terminal; `--env`, `--cwd`, `--user`, `--group`)",
        exec,
    ),
    (
        "`file push`, `file pull` (`--uid`, `--gid`, `--mode`, target `-`)",
        files,
    ),
    (
        "`snapshot NAME SNAP`, `restore NAME SNAP`, `delete NAME/SNAP`, snapshots in `info`",
        snapshots,
    ),
    (
        "`config show`, `config get`, `config set`, `config unset`",
        config,
    ),
    (
        "`config device add`, `config device remove`, `config device list`, `config device show`",
        device_add,
    ),
    (
        "VMs, `profile`, `network`, `storage`, backups, freeze",
        refused,
    ),
    ("`start`, `stop`, `restart`, `delete [-f]`", lifecycle),
];

#[test]
fn every_row_of_the_lxc_table_holds() {
    let rows = rows();
    for (verb, _) in &rows {
        assert!(
            CHECKS.iter().any(|(row, _)| row == verb),
            "the README's row {verb} has no check in tests/tests/lxc_coverage.rs"
        );
    }
    let node = OneNode::start_with_lxd_api();
    let lxc = Lxc::trusted_by(&node.cli, "coverage", None);
    for (row, check) in CHECKS {
        let (_, what) = rows
            .iter()
            .find(|(verb, _)| verb == row)
            .unwrap_or_else(|| panic!("the check {row} has no row in the README's table"));
        let works = what.starts_with("works");
        assert!(
            works || what.starts_with("refused"),
            "{row}: a row says works or refused: {what}"
        );
        check(&lxc, &node);
    }
}

fn remote_add(_: &Lxc, node: &OneNode) {
    let token = cli_support::token_of(&node.cli.ok(&["config", "trust", "add", "second"]));
    let second = Lxc::new();
    second.ok(&["remote", "add", "lab", &token]);
    let server: serde_json::Value =
        serde_json::from_str(&second.ok(&["query", "lab:/1.0"])).expect("JSON");
    assert_eq!(server["auth"], "trusted", "{server}");
}

fn launch_init(lxc: &Lxc, _: &OneNode) {
    lxc.ok(&[
        "launch",
        "lab:cohort/base",
        "lab:cov1",
        "--target",
        "node1",
        "-c",
        "limits.cpu=1",
        "-c",
        "limits.memory=256MiB",
    ]);
    lxc.ok(&[
        "init",
        "lab:cohort/base",
        "lab:cov2",
        "-c",
        "limits.memory=256MiB",
    ]);
    assert_eq!(
        lxc.ok(&["config", "get", "lab:cov1", "limits.memory"])
            .trim(),
        "256MiB"
    );
}

fn list(lxc: &Lxc, node: &OneNode) {
    assert_eq!(
        lxc.ok(&["list", "lab:", "-c", "ns", "-f", "csv"]),
        "cov1,RUNNING\ncov2,STOPPED\n"
    );
    let listed: serde_json::Value =
        serde_json::from_str(&lxc.ok(&["list", "lab:", "-f", "json"])).expect("JSON");
    assert_eq!(listed[0]["name"], "cov1", "{listed}");
    let all = lxc.ok(&["list", "lab:", "--all-projects", "-c", "n", "-f", "csv"]);
    assert!(all.contains("cov1") && all.contains("cov2"), "{all}");
    let default = lxc.ok(&[
        "list",
        "lab:",
        "--project",
        "default",
        "-c",
        "n",
        "-f",
        "csv",
    ]);
    assert!(default.contains("cov1"), "{default}");
    // A course is a project: its class is listed with `--project CODE`.
    let cli = &node.cli;
    cli.ok(&[
        "course",
        "create",
        "cov101",
        "--title",
        "Coverage",
        "--image",
        "cohort/base",
        "--cpu",
        "1",
        "--memory",
        "256MiB",
        "--disk",
        "2GiB",
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        "username,name,email,ssh_key\nann,Ann A,ann@example.edu,\n",
    )
    .expect("roster");
    cli.ok(&["course", "roster", "cov101", roster.to_str().unwrap()]);
    cli.ok(&["course", "provision", "cov101", "--wait", "--quiet"]);
    assert!(lxc
        .ok(&["project", "list", "lab:", "-f", "csv"])
        .contains("cov101"));
    assert_eq!(
        lxc.ok(&[
            "list",
            "lab:",
            "--project",
            "cov101",
            "-c",
            "n",
            "-f",
            "csv"
        ]),
        "cov101-ann\n"
    );
    cli.ok(&["-q", "course", "teardown", "cov101", "--delete", "--force"]);
}

fn info_and_lists(lxc: &Lxc, _: &OneNode) {
    let info = lxc.ok(&["info", "lab:cov1"]);
    assert!(
        info.contains("Name: cov1") && info.contains("RUNNING"),
        "{info}"
    );
    assert!(lxc
        .ok(&["image", "list", "lab:", "-f", "csv"])
        .contains("cohort/base"));
    let operations = lxc.ok(&["operation", "list", "lab:", "-f", "csv"]);
    let id = operations
        .lines()
        .next()
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("an operation (the launches): {operations}"));
    assert!(lxc
        .ok(&["operation", "show", &format!("lab:{id}")])
        .contains(id));
    assert!(lxc
        .ok(&["cluster", "list", "lab:", "-f", "csv"])
        .starts_with("node1,"));
    let projects = lxc.ok(&["project", "list", "lab:", "-f", "csv"]);
    assert!(
        projects.lines().any(|p| p.starts_with("default")),
        "{projects}"
    );
}

fn exec(lxc: &Lxc, _: &OneNode) {
    let out = lxc.run(&[
        "exec",
        "lab:cov1",
        "--env",
        "WHO=coverage",
        "--cwd",
        "/tmp",
        "--",
        "sh",
        "-c",
        "echo $WHO $(pwd); echo err >&2; exit 5",
    ]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "coverage /tmp\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
}

fn files(lxc: &Lxc, _: &OneNode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let local = dir.path().join("notes.txt");
    std::fs::write(&local, "pushed through Cohort\n").expect("write");
    lxc.ok(&[
        "file",
        "push",
        "--mode",
        "0640",
        local.to_str().unwrap(),
        "lab:cov1/root/notes.txt",
    ]);
    assert_eq!(
        lxc.ok(&["file", "pull", "lab:cov1/root/notes.txt", "-"]),
        "pushed through Cohort\n"
    );
    lxc.fails(
        &[
            "file",
            "pull",
            "-r",
            "lab:cov1/root",
            dir.path().to_str().unwrap(),
        ],
        "Error:",
    );
}

fn snapshots(lxc: &Lxc, _: &OneNode) {
    lxc.ok(&["snapshot", "lab:cov1", "first"]);
    lxc.ok(&["exec", "lab:cov1", "--", "rm", "/root/notes.txt"]);
    assert!(lxc.ok(&["info", "lab:cov1"]).contains("first"));
    lxc.ok(&["restore", "lab:cov1", "first"]);
    assert_eq!(
        lxc.ok(&["file", "pull", "lab:cov1/root/notes.txt", "-"]),
        "pushed through Cohort\n"
    );
    lxc.ok(&["delete", "lab:cov1/first"]);
    assert!(!lxc.ok(&["info", "lab:cov1"]).contains("first"));
}

fn config(lxc: &Lxc, _: &OneNode) {
    lxc.ok(&["config", "set", "lab:cov1", "user.course=cs101"]);
    assert_eq!(
        lxc.ok(&["config", "get", "lab:cov1", "user.course"]).trim(),
        "cs101"
    );
    assert!(lxc
        .ok(&["config", "show", "lab:cov1"])
        .contains("user.course: cs101"));
    lxc.ok(&["config", "unset", "lab:cov1", "user.course"]);
    assert_eq!(
        lxc.ok(&["config", "get", "lab:cov1", "user.course"]).trim(),
        ""
    );
    lxc.fails(
        &["config", "set", "lab:cov1", "security.privileged=true"],
        "security.privileged",
    );
}

/// A host directory shared into `cov1` as an admin shares a dataset (removed by `lifecycle`).
fn share_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cohort-coverage-share-{}", std::process::id()))
}

fn device_add(lxc: &Lxc, node: &OneNode) {
    let share = share_dir();
    std::fs::create_dir_all(&share).expect("share dir");
    let source = format!("source={}", share.display());
    lxc.ok(&[
        "config",
        "device",
        "add",
        "lab:cov1",
        "data",
        "disk",
        &source,
        "path=/data",
    ]);
    let devices = node.lxd.lxc(&["config", "device", "show", "cov1"]);
    assert!(
        devices.contains("data:") && devices.contains("/data"),
        "{devices}"
    );
    // Through Cohort: the node's devices, Cohort's own among them, and a removal.
    let listed = lxc.ok(&["config", "device", "list", "lab:cov1"]);
    assert!(listed.lines().any(|d| d == "data"), "{listed}");
    assert!(listed.lines().any(|d| d == "root"), "{listed}");
    let shown = lxc.ok(&["config", "device", "show", "lab:cov1"]);
    assert!(shown.contains("path: /data"), "{shown}");
    lxc.fails(
        &["config", "device", "remove", "lab:cov1", "root"],
        "managed by Cohort",
    );
    lxc.ok(&["config", "device", "remove", "lab:cov1", "data"]);
    let devices = node.lxd.lxc(&["config", "device", "list", "cov1"]);
    assert!(!devices.lines().any(|d| d.trim() == "data"), "{devices}");
}

fn refused(lxc: &Lxc, _: &OneNode) {
    let dir = tempfile::tempdir().expect("temp dir");
    let backup = dir.path().join("cov1.tar.gz");
    for args in [
        &["init", "lab:cohort/base", "lab:vm1", "--vm"][..],
        &["profile", "list", "lab:"],
        &["network", "list", "lab:"],
        &["storage", "list", "lab:"],
        &["export", "lab:cov1", backup.to_str().unwrap()],
        &["pause", "lab:cov1"],
    ] {
        lxc.fails(args, "Error:");
    }
    assert!(!backup.exists());
}

fn lifecycle(lxc: &Lxc, node: &OneNode) {
    lxc.ok(&["start", "lab:cov2"]);
    lxc.ok(&["restart", "lab:cov2"]);
    lxc.ok(&["stop", "lab:cov2"]);
    assert_eq!(
        lxc.ok(&["list", "lab:cov2", "-c", "s", "-f", "csv"]),
        "STOPPED\n"
    );
    lxc.ok(&["delete", "lab:cov2"]);
    lxc.ok(&["delete", "-f", "lab:cov1"]);
    assert_eq!(lxc.ok(&["list", "lab:", "-f", "csv"]), "");
    assert!(node.lxd.instance_names().is_empty());
    std::fs::remove_dir_all(share_dir()).expect("remove the share");
}
