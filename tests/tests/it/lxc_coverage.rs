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
        "`list -c n4s`, `list -f json` (state: addresses, memory, CPU, disk, processes), usage in `info`",
        live_state,
    ),
    (
        "`network list`, `storage list`, `storage info`",
        networks_and_pools,
    ),
    (
        "`move NAME --target NODE`, `console --show-log`, `image export`, `publish`",
        move_console_export,
    ),
    ("`monitor`", monitor),
    (
        "VMs, `profile`, backups, freeze, `copy`, `rename`, interactive `console`, moves to another remote",
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
    let address = node.controller.lxd_address.clone().expect("LXD-style API");
    ADDRESS.with(|a| *a.borrow_mut() = address);
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

/// The node is LXD 5.0.2, which loses a quick command's output now and then on a fully loaded
/// host: the command runs and ends with its code, and its output websocket closes empty
/// (canonical/lxd#11422, fixed in LXD 5.14 by #11606; Incus has the fix). Seen once in a whole
/// run of the suite here: exit code 5, stdout empty. So a run whose output LXD lost is run
/// again, at most twice, and the output must then be whole.
fn exec(lxc: &Lxc, _: &OneNode) {
    let run = || {
        lxc.run(&[
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
        ])
    };
    let mut out = run();
    for _ in 0..2 {
        let lost = out.status.code() == Some(5) && (out.stdout.is_empty() || out.stderr.is_empty());
        if !lost {
            break;
        }
        eprintln!("lxc exec: LXD 5.0 lost the output ({out:?}); running it again");
        out = run();
    }
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
        &["export", "lab:cov1", backup.to_str().unwrap()],
        &["pause", "lab:cov1"],
    ] {
        lxc.fails(args, "Error:");
    }
    assert!(!backup.exists());
    // Each refusal says why, in LXD's error envelope: never "Not Found".
    for (args, why) in [
        (
            &["copy", "lab:cov1", "lab:cov3"][..],
            "Not supported by Cohort: copying",
        ),
        (
            &["rename", "lab:cov1", "lab:cov3"],
            "Not supported by Cohort: renaming",
        ),
        (
            &["network", "create", "lab:net9"],
            "Not supported by Cohort: networks are each node's own",
        ),
        (
            &["storage", "create", "lab:pool9", "dir"],
            "Not supported by Cohort: storage pools are each node's own",
        ),
        (
            &["network", "delete", "lab:node1"],
            "Not supported by Cohort: networks are each node's own",
        ),
    ] {
        lxc.fails(args, why);
    }
    let (refusal, status) = lxc.curl_with(
        &lxd_address(),
        "/1.0/instances/cov1/console",
        &["-X", "POST", "-d", "{}"],
    );
    assert_eq!(status, 501, "{refusal}");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Not supported by Cohort: interactive consoles"),
        "{refusal}"
    );
    assert!(!lxc
        .ok(&["list", "lab:", "-c", "n", "-f", "csv"])
        .contains("cov3"));
}

/// The `host:port` of the LXD-style API the coverage node serves (set by the test).
fn lxd_address() -> String {
    ADDRESS.with(|a| a.borrow().clone())
}

thread_local! {
    static ADDRESS: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

fn live_state(lxc: &Lxc, _: &OneNode) {
    // The node's LXD gives the state: usage a record could not hold. (Addresses, which a
    // node network gives, are checked by lxc_state.rs.)
    let listed: serde_json::Value =
        serde_json::from_str(&lxc.ok(&["list", "lab:", "-f", "json"])).expect("JSON");
    let cov1 = &listed[0]["state"];
    assert_eq!(cov1["status"], "Running", "{cov1}");
    assert!(cov1["memory"]["usage"].as_u64() > Some(0), "{cov1}");
    assert!(cov1["processes"].as_i64() > Some(0), "{cov1}");
    assert!(cov1["pid"].as_i64() > Some(0), "{cov1}");
    assert!(cov1["network"]["lo"].is_object(), "{cov1}");
    assert_eq!(listed[1]["state"]["status"], "Stopped", "{listed}");
    assert_eq!(
        lxc.ok(&["list", "lab:", "-c", "n4s", "-f", "csv"]),
        "cov1,,RUNNING\ncov2,,STOPPED\n"
    );
    let info = lxc.ok(&["info", "lab:cov1"]);
    for shown in ["Processes:", "Memory usage:", "CPU usage:"] {
        assert!(info.contains(shown), "{shown} in {info}");
    }
}

fn networks_and_pools(lxc: &Lxc, _: &OneNode) {
    let networks = lxc.ok(&["network", "list", "lab:", "-f", "csv"]);
    assert!(networks.starts_with("node1,bridge,YES,"), "{networks}");
    assert_eq!(networks.lines().count(), 1, "{networks}");
    let network = lxc.ok(&["network", "show", "lab:node1"]);
    assert!(network.contains("/1.0/instances/cov1"), "{network}");
    let pools = lxc.ok(&["storage", "list", "lab:", "-f", "csv"]);
    assert!(pools.starts_with("node1,"), "{pools}");
    assert!(pools.contains("GiB free of"), "{pools}");
    let info = lxc.ok(&["storage", "info", "lab:node1"]);
    assert!(
        info.contains("space used:") && info.contains("total space:"),
        "{info}"
    );
}

fn move_console_export(lxc: &Lxc, _: &OneNode) {
    // One node: the move reaches Cohort's move, which says why it cannot be done.
    lxc.fails(
        &["move", "lab:cov1", "--target", "node1"],
        "instance cov1 is on node node1 already",
    );
    let out = lxc.run(&["move", "lab:cov1", "--target", "node1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("Not Found") && !stderr.contains("not found"),
        "{stderr}"
    );
    // The log LXD keeps, through the node's agent (none kept here is an empty log).
    lxc.ok(&["console", "lab:cov1", "--show-log"]);
    // `image export` is checked, byte for byte, by lxd_clients.rs.
    // `publish` is Cohort's: the stopped cov2 becomes a catalog image, whose fingerprint the
    // client prints from the operation.
    let out = lxc.ok(&["publish", "lab:cov2", "lab:", "--alias", "cov2-image"]);
    let fingerprint = out
        .trim()
        .strip_prefix("Instance published with fingerprint: ")
        .unwrap_or_else(|| panic!("{out}"));
    let images = lxc.ok(&["image", "list", "lab:", "-f", "csv", "-c", "lf"]);
    assert!(
        images.contains(&format!("cov2-image,{}", &fingerprint[..12])),
        "{images}"
    );
}

fn monitor(lxc: &Lxc, _: &OneNode) {
    use std::io::Read;
    let mut watching = lxc
        .command(&["monitor", "lab:"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("lxc monitor");
    let mut stdout = watching.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buffer) {
            if n == 0 || tx.send(buffer[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // An event of a change made while it watches: the restart's operation.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = String::new();
    lxc.ok(&["restart", "lab:cov1"]);
    while !(seen.contains("type: operation") && seen.contains("/1.0/instances/cov1"))
        && std::time::Instant::now() < deadline
    {
        if let Ok(bytes) = rx.recv_timeout(std::time::Duration::from_secs(5)) {
            seen.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    watching.kill().expect("end lxc monitor");
    let _ = watching.wait();
    assert!(
        seen.contains("type: operation") && seen.contains("/1.0/instances/cov1"),
        "no operation event of the restart: {seen}"
    );
}

fn lifecycle(lxc: &Lxc, node: &OneNode) {
    lxc.ok(&["start", "lab:cov2"]);
    lxc.ok(&["restart", "lab:cov2"]);
    // LXD's answer to deleting a running instance: a 400 that says to stop it.
    let (refusal, status) = lxc.curl_with(&lxd_address(), "/1.0/instances/cov2", &["-X", "DELETE"]);
    assert_eq!(status, 400, "{refusal}");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap_or_default()
            .contains("stop it first"),
        "{refusal}"
    );
    lxc.fails(&["delete", "lab:cov2"], "stop it first");
    lxc.ok(&["stop", "lab:cov2"]);
    // The stop's operation stays readable once it has ended, with its final status, and a
    // wait on it answers at once.
    let (ops, _) = lxc.curl(&lxd_address(), "/1.0/operations?recursion=1");
    let stop = ops["metadata"]["success"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|op| op["resources"]["instances"][0] == "/1.0/instances/cov2")
        .max_by_key(|op| op["created_at"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| panic!("the stop among the ended operations: {ops}"))
        .clone();
    let id = stop["id"].as_str().expect("id");
    let (shown, status) = lxc.curl(&lxd_address(), &format!("/1.0/operations/{id}"));
    assert_eq!(
        (status, &shown["metadata"]["status"]),
        (200, &serde_json::json!("Success")),
        "{shown}"
    );
    let started = std::time::Instant::now();
    let (waited, _) = lxc.curl(&lxd_address(), &format!("/1.0/operations/{id}/wait"));
    assert_eq!(waited["metadata"]["status"], "Success", "{waited}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
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
