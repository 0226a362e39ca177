//! Every instance verb of `cohort` against a real controller and a real agent on one node, with
//! the real `lxc` as the witness where LXD's own view matters.

use crate::cli_support;

use cli_support::OneNode;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn instance_verbs_on_a_running_node() {
    let node = OneNode::start();
    let (lxd, cli) = (&node.lxd, &node.cli);
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "c1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let info = cli.ok(&["info", "c1"]);
    assert!(info.starts_with("Name: c1\nStatus: RUNNING\nType: container\nLocation: node1\n"));
    assert!(info.contains("SSH: ssh -p "), "{info}");

    // exec: output split as the command wrote it, its exit code, env, cwd and piped stdin.
    let out = cli.run(&[
        "exec",
        "c1",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        (text(&out.stdout), text(&out.stderr)),
        ("out\n".into(), "err\n".into())
    );
    let env = cli.ok(&[
        "exec",
        "c1",
        "--env",
        "A=b",
        "--cwd",
        "/tmp",
        "--",
        "sh",
        "-c",
        "echo $A; pwd",
    ]);
    assert_eq!(env, "b\n/tmp\n");
    let piped = cli.run_with_stdin(&["exec", "c1", "--", "cat"], b"piped\n");
    assert_eq!(text(&piped.stdout), "piped\n");

    // file push and pull, with mode and created directories.
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("hello.txt");
    std::fs::write(&local, "hello\n").unwrap();
    let local = local.to_str().unwrap();
    cli.ok(&["file", "push", local, "c1/root/hello.txt", "--mode", "0640"]);
    cli.ok(&["file", "push", "-p", local, "c1/opt/a/b/"]);
    let stat = lxd.lxc(&["exec", "c1", "--", "stat", "-c", "%a %U", "/root/hello.txt"]);
    assert_eq!(stat, "640 root\n");
    assert_eq!(
        lxd.lxc(&["exec", "c1", "--", "cat", "/opt/a/b/hello.txt"]),
        "hello\n"
    );
    let pulled = dir.path().join("pulled");
    cli.ok(&[
        "file",
        "pull",
        "c1/root/hello.txt",
        pulled.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&pulled).unwrap(), "hello\n");
    assert_eq!(
        cli.ok(&["file", "pull", "c1/opt/a/b/hello.txt", "-"]),
        "hello\n"
    );

    // snapshot, restore, delete a snapshot.
    cli.ok(&["snapshot", "c1"]);
    assert!(cli.ok(&["info", "c1"]).contains("| snap0 |"));
    assert!(
        lxd.lxc(&["info", "c1"]).contains("snap0"),
        "LXD has the snapshot"
    );
    cli.ok(&["exec", "c1", "--", "rm", "/root/hello.txt"]);
    cli.ok(&["restore", "c1", "snap0"]);
    assert_eq!(
        lxd.lxc(&["exec", "c1", "--", "cat", "/root/hello.txt"]),
        "hello\n"
    );
    cli.ok(&["delete", "c1/snap0"]);
    assert!(!cli.ok(&["info", "c1"]).contains("snap0"));

    // stop, start, restart, as LXD sees them.
    let state = || lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    cli.ok(&["stop", "c1"]);
    assert_eq!(state(), "c1,STOPPED\n");
    let started = std::time::Instant::now();
    while cli.ok(&["list", "-f", "csv", "-c", "ns"]) != "c1,STOPPED\n" {
        assert!(
            started.elapsed().as_secs() < 60,
            "the controller never saw c1 stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    cli.ok(&["start", "c1"]);
    assert_eq!(state(), "c1,RUNNING\n");
    cli.ok(&["restart", "c1"]);
    assert_eq!(state(), "c1,RUNNING\n");

    // operations: every long action above left one.
    let ops = cli.ok(&["operation", "list", "-f", "csv"]);
    let id = ops
        .lines()
        .find(|l| l.contains(",create_instance,c1,SUCCESS,"))
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("create operation listed: {ops}"));
    cli.ok(&["operation", "wait", id]);
    assert!(cli
        .ok(&["operation", "show", id])
        .contains("status: success"));

    cli.ok(&["delete", "-f", "c1"]);
    assert_eq!(lxd.lxc(&["list", "-f", "csv", "-c", "n"]), "");
    cli.fails(&["info", "c1"], "not found");
}

#[test]
fn cluster_verbs_show_and_drain_the_node() {
    let node = OneNode::start();
    let cli = &node.cli;
    let shown = cli.ok(&["cluster", "show", "node1"]);
    assert!(
        shown.contains("name: node1") && shown.contains("state: online"),
        "{shown}"
    );
    assert!(cli.ok(&["node", "list", "-f", "csv"]).starts_with("node1,"));
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "c1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let resources = cli.ok(&["info", "--resources"]);
    assert!(
        resources.contains("nodes:") && resources.contains("name: node1"),
        "{resources}"
    );
    let images = cli.ok(&["image", "list", "-f", "csv"]);
    assert!(
        images.trim_end().ends_with(",node1"),
        "the node holds the image: {images}"
    );

    cli.ok(&["-q", "cluster", "evacuate", "node1", "--force"]);
    let nodes = cli.ok(&["cluster", "list", "-f", "csv"]);
    assert!(
        !nodes.contains(",ONLINE,"),
        "evacuated node takes no placements: {nodes}"
    );
    assert_eq!(
        node.lxd.lxc(&["list", "-f", "csv", "-c", "ns"]),
        "c1,STOPPED\n"
    );
    cli.ok(&["-q", "cluster", "restore", "node1", "--force"]);
    assert!(cli
        .ok(&["cluster", "list", "-f", "csv"])
        .contains(",ONLINE,"));

    cli.ok(&["delete", "-f", "c1"]);
    cli.ok(&["node", "remove", "node1"]);
    assert_eq!(cli.ok(&["node", "list", "-f", "csv"]), "");
}
