//! `lxc file push|pull`, `lxc snapshot`, `restore`, `info` and `delete NAME/SNAP` (the real
//! 5.0.2 client), and `lxc config set|unset|get|device add`, through Cohort's LXD-style API on
//! one container: what the client pushes or sets is
//! what the node's own LXD then shows, a restore brings the old file back, and a student's
//! client reaches nothing of another user's container.

use crate::cli_support;

use std::os::unix::fs::PermissionsExt;

use cli_support::{Lxc, OneNode};

#[test]
fn lxc_moves_files_and_snapshots_through_cohort() {
    let node = OneNode::start_with_lxd_api();
    let (lxd, cli) = (&node.lxd, &node.cli);
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    let lxc = Lxc::trusted_by(cli, "admin-laptop", None);
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();

    // Every byte value, so nothing on the way may treat the file as text.
    let data: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(path("data.bin"), &data).unwrap();
    lxc.ok(&[
        "file",
        "push",
        "--mode",
        "0640",
        "--uid",
        "1000",
        "--gid",
        "100",
        &path("data.bin"),
        "lab:web1/root/data.bin",
    ]);
    let stat = [
        "exec",
        "web1",
        "--",
        "stat",
        "-c",
        "%a %u %g %s",
        "/root/data.bin",
    ];
    assert_eq!(lxd.lxc(&stat).trim(), "640 1000 100 70000");

    // Pulled back byte for byte, with its mode; to stdout with `-`.
    lxc.ok(&["file", "pull", "lab:web1/root/data.bin", &path("back.bin")]);
    assert_eq!(std::fs::read(path("back.bin")).unwrap(), data);
    let mode = std::fs::metadata(path("back.bin")).unwrap().permissions();
    assert_eq!(mode.mode() & 0o7777, 0o640);
    assert_eq!(
        lxc.ok(&["file", "pull", "lab:web1/etc/hostname", "-"]),
        "web1\n"
    );
    lxc.fails(
        &["file", "pull", "lab:web1/root/nothere", &path("x")],
        "not found",
    );
    assert!(!dir.path().join("x").exists());

    // A snapshot, a change, the restore: the old bytes are back, as the node's LXD shows.
    lxc.ok(&["snapshot", "lab:web1", "before"]);
    let info = lxc.ok(&["info", "lab:web1"]);
    assert!(
        info.contains("Snapshots:") && info.contains("| before "),
        "{info}"
    );
    assert!(lxd.lxc(&["info", "web1"]).contains("| before "));
    std::fs::write(path("changed.txt"), b"changed\n").unwrap();
    lxc.ok(&[
        "file",
        "push",
        &path("changed.txt"),
        "lab:web1/root/data.bin",
    ]);
    assert_eq!(
        lxd.lxc(&["exec", "web1", "--", "cat", "/root/data.bin"]),
        "changed\n"
    );
    lxc.ok(&["restore", "lab:web1", "before"]);
    lxc.ok(&[
        "file",
        "pull",
        "lab:web1/root/data.bin",
        &path("restored.bin"),
    ]);
    assert_eq!(std::fs::read(path("restored.bin")).unwrap(), data);
    lxc.fails(&["restore", "lab:web1", "nosuch"], "not found");

    // A student's client: no file either way, no snapshot, in someone else's container.
    cli.ok(&["user", "create", "sam", "--role", "student"]);
    let sam = Lxc::trusted_by(cli, "sams-laptop", Some("sam"));
    let out = sam.run(&["file", "pull", "lab:web1/root/data.bin", &path("stolen")]);
    assert!(!out.status.success(), "{out:?}");
    assert!(!dir.path().join("stolen").exists());
    let out = sam.run(&[
        "file",
        "push",
        &path("changed.txt"),
        "lab:web1/root/data.bin",
    ]);
    assert!(!out.status.success(), "{out:?}");
    let out = sam.run(&["snapshot", "lab:web1", "mine"]);
    assert!(!out.status.success(), "{out:?}");
    let out = sam.run(&["delete", "lab:web1/before"]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(lxd.lxc(&stat).trim(), "640 1000 100 70000");

    // Config within Cohort's allow-list, as the node's LXD then holds it; refusals are LXD
    // errors the client prints.
    lxc.ok(&["config", "set", "lab:web1", "user.note", "hello"]);
    assert_eq!(
        lxc.ok(&["config", "get", "lab:web1", "user.note"]),
        "hello\n"
    );
    assert_eq!(lxd.lxc(&["config", "get", "web1", "user.note"]), "hello\n");
    lxc.ok(&["config", "unset", "lab:web1", "user.note"]);
    assert_eq!(lxd.lxc(&["config", "get", "web1", "user.note"]), "\n");
    lxc.fails(
        &["config", "set", "lab:web1", "security.privileged", "true"],
        "config key \"security.privileged\" is not allowed",
    );
    lxc.fails(
        &["config", "set", "lab:web1", "user.cohort.owner", "sam"],
        "set by Cohort",
    );
    assert_eq!(
        lxd.lxc(&["config", "get", "web1", "security.privileged"]),
        "\n"
    );
    // A device (admins only): a host directory the test made, mounted as the node's LXD shows.
    let share = path("share");
    std::fs::create_dir(&share).unwrap();
    let source = format!("source={share}");
    lxc.ok(&[
        "config",
        "device",
        "add",
        "lab:web1",
        "share",
        "disk",
        &source,
        "path=/mnt/share",
    ]);
    let devices = lxd.lxc(&["config", "device", "show", "web1"]);
    assert!(
        devices.contains("share:") && devices.contains("/mnt/share"),
        "{devices}"
    );
    let out = sam.run(&["config", "set", "lab:web1", "user.note", "mine"]);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(lxd.lxc(&["config", "get", "web1", "user.note"]), "\n");

    // The owner deletes the snapshot; the node's LXD has none left.
    lxc.ok(&["delete", "lab:web1/before"]);
    assert!(!lxc.ok(&["info", "lab:web1"]).contains("before"));
    assert!(!lxd.lxc(&["info", "web1"]).contains("before"));
}
