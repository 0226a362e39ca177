//! `cohort config set|unset|edit` and `cohort config device add|remove|list|show` against a real
//! controller and a real agent on one node; the real `lxc` is the witness of what LXD holds.
//! Refused keys and devices leave LXD as it was.

use crate::cli_support;

use cli_support::{Cli, OneNode};

fn lxc_get(node: &OneNode, key: &str) -> String {
    node.lxd
        .lxc(&["config", "get", "c1", key])
        .trim()
        .to_string()
}

fn lxc_devices(node: &OneNode) -> Vec<String> {
    let mut names: Vec<String> = node
        .lxd
        .lxc(&["config", "device", "list", "c1"])
        .lines()
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

#[test]
fn live_config_and_devices_reach_lxd() {
    let node = OneNode::start();
    let cli = &node.cli;
    cli.ok(&["-q", "launch", "cohort/base", "c1"]);
    let own_devices = lxc_devices(&node);
    assert!(
        own_devices.contains(&"cohort-ssh".to_string()),
        "{own_devices:?}"
    );

    // set (k=v... and lxc's older `key value`), get, unset: LXD holds exactly that.
    cli.ok(&[
        "config",
        "set",
        "c1",
        "user.color=blue",
        "limits.processes=500",
    ]);
    cli.ok(&["config", "set", "c1", "user.size", "large"]);
    assert_eq!(lxc_get(&node, "user.color"), "blue");
    assert_eq!(lxc_get(&node, "limits.processes"), "500");
    assert_eq!(lxc_get(&node, "user.size"), "large");
    assert_eq!(cli.ok(&["config", "get", "c1", "user.color"]), "blue\n");
    cli.ok(&["config", "unset", "c1", "user.color"]);
    assert_eq!(lxc_get(&node, "user.color"), "");
    assert!(!cli.ok(&["config", "show", "c1"]).contains("user.color"));

    // Refused keys name the key and change nothing.
    for (pair, key) in [
        ("security.privileged=true", "security.privileged"),
        ("raw.lxc=lxc.apparmor.profile=unconfined", "raw.lxc"),
        ("volatile.idmap.next=x", "volatile.idmap.next"),
        ("user.cohort.spec=x", "user.cohort.spec"),
        ("limits.cpu=64", "limits.cpu"),
        ("bogus.key=1", "bogus.key"),
    ] {
        cli.fails(&["config", "set", "c1", pair], key);
        let raw = node.lxd.lxc_output(&["config", "get", "c1", key]);
        let now = String::from_utf8_lossy(&raw.stdout).trim().to_string();
        let asked = pair.split_once('=').unwrap().1;
        assert_ne!(now, asked, "{key} reached LXD");
    }
    assert_eq!(lxc_get(&node, "security.privileged"), "");
    assert_eq!(lxc_get(&node, "limits.cpu"), "1");
    cli.fails(
        &["config", "unset", "c1", "security.idmap.isolated"],
        "security.idmap.isolated",
    );
    assert_eq!(lxc_get(&node, "security.idmap.isolated"), "true");

    // edit: the YAML read back (stdin is not a terminal) is applied as a difference.
    let shown = cli.ok(&["config", "show", "c1"]);
    let edited = shown.replace("user.size: large", "user.edited: 'yes'");
    assert_ne!(shown, edited, "config show lists user.size: {shown}");
    let out = cli.run_with_stdin(&["config", "edit", "c1"], edited.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(lxc_get(&node, "user.edited"), "yes");
    assert_eq!(lxc_get(&node, "user.size"), "");
    let bad = shown.replace("user.size: large", "security.nesting: 'true'");
    let out = cli.run_with_stdin(&["config", "edit", "c1"], bad.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("security.nesting"));
    assert_eq!(lxc_get(&node, "security.nesting"), "");

    // A proxy device on loopback: LXD has it and it forwards to the container's sshd.
    let ports = cohort_e2e::PortRange::claim();
    let listen = format!("listen=tcp:127.0.0.1:{}", ports.port(0));
    cli.ok(&[
        "config",
        "device",
        "add",
        "c1",
        "web",
        "proxy",
        &listen,
        "connect=tcp:127.0.0.1:22",
    ]);
    assert!(lxc_devices(&node).contains(&"web".to_string()));
    assert_eq!(
        node.lxd
            .lxc(&["config", "device", "get", "c1", "web", "listen"])
            .trim(),
        listen.trim_start_matches("listen=")
    );
    let banner = ssh_banner(ports.port(0));
    assert!(banner.starts_with("SSH-2.0-"), "{banner:?}");

    // A custom volume of the pool, and (admin) a host path.
    node.lxd
        .lxc(&["storage", "volume", "create", "cohort", "data1"]);
    cli.ok(&[
        "config",
        "device",
        "add",
        "c1",
        "data",
        "disk",
        "source=data1",
        "path=/data",
    ]);
    assert_eq!(
        node.lxd.lxc(&[
            "exec",
            "c1",
            "--",
            "sh",
            "-c",
            "mountpoint -q /data && echo yes"
        ]),
        "yes\n"
    );
    let host = tempfile::tempdir().unwrap();
    let source = format!("source={}", host.path().display());
    cli.ok(&[
        "config",
        "device",
        "add",
        "c1",
        "hostdir",
        "disk",
        &source,
        "path=/mnt/host",
    ]);
    assert!(lxc_devices(&node).contains(&"hostdir".to_string()));

    let listed = cli.ok(&["config", "device", "list", "c1"]);
    for name in ["cohort-ssh", "data", "hostdir", "root", "web"] {
        assert!(listed.lines().any(|l| l == name), "{name} not in {listed}");
    }
    let shown = cli.ok(&["config", "device", "show", "c1"]);
    assert!(shown.contains("connect: tcp:127.0.0.1:22"), "{shown}");

    // Refused devices name the field and add nothing.
    let before = lxc_devices(&node);
    for (args, field) in [
        (vec!["g", "gpu"], "devices.g.type"),
        (vec!["u", "unix-char", "path=/dev/kmsg"], "devices.u.type"),
        (vec!["b", "unix-block", "path=/dev/sda"], "devices.b.type"),
        (
            vec!["n", "nic", "nictype=bridged", "parent=lxdbr0"],
            "devices.n.type",
        ),
        (
            vec!["h", "disk", "source=/", "path=/host"],
            "devices.h.source",
        ),
        (
            vec![
                "w",
                "proxy",
                "listen=tcp:0.0.0.0:2222",
                "connect=tcp:127.0.0.1:22",
            ],
            "devices.w.listen",
        ),
        (
            vec!["v", "disk", "source=nope", "path=/nope"],
            "devices.v.source",
        ),
        (
            vec!["cohort-x", "disk", "source=data1", "path=/x"],
            "devices.cohort-x",
        ),
        (
            vec![
                "web",
                "proxy",
                "listen=tcp:127.0.0.1:1",
                "connect=tcp:127.0.0.1:22",
            ],
            "already exists",
        ),
    ] {
        let mut full = vec!["config", "device", "add", "c1"];
        full.extend(args);
        cli.fails(&full, field);
    }
    assert_eq!(lxc_devices(&node), before);

    // Cohort's own devices stay.
    for own in ["cohort-ssh", "root"] {
        cli.fails(
            &["config", "device", "remove", "c1", own],
            "managed by Cohort",
        );
    }
    cli.fails(
        &["config", "device", "remove", "c1", "nothere"],
        "no device nothere",
    );

    // Remove: LXD no longer has it (the rest of the config is untouched).
    cli.ok(&["config", "device", "remove", "c1", "web", "hostdir"]);
    let after = lxc_devices(&node);
    assert!(!after.contains(&"web".to_string()) && !after.contains(&"hostdir".to_string()));
    assert!(after.contains(&"data".to_string()) && after.contains(&"cohort-ssh".to_string()));
    assert_eq!(lxc_get(&node, "user.edited"), "yes");
    assert_eq!(lxc_get(&node, "security.idmap.isolated"), "true");
    cli.ok(&["config", "device", "remove", "c1", "data"]);

    // A student may set keys on their own instance but not touch devices.
    cli.ok(&["user", "create", "sam", "--role", "student"]);
    let token = cli.ok(&["user", "token", "sam"]);
    let sam = Cli {
        conf: tempfile::tempdir().unwrap(),
    };
    sam.ok(&[
        "remote",
        "add",
        "lab",
        &node.controller.url,
        "--token",
        token.trim(),
        "--accept-certificate",
    ]);
    sam.fails(&["config", "set", "c1", "user.x=1"], "not yours");
    sam.ok(&["-q", "launch", "cohort/base", "s1"]);
    sam.ok(&["config", "set", "s1", "user.mine=1"]);
    assert_eq!(
        node.lxd.lxc(&["config", "get", "s1", "user.mine"]).trim(),
        "1"
    );
    sam.fails(
        &[
            "config",
            "device",
            "add",
            "s1",
            "web",
            "proxy",
            "listen=tcp:127.0.0.1:2",
            "connect=tcp:127.0.0.1:22",
        ],
        "only an admin",
    );
    sam.fails(
        &["config", "device", "remove", "s1", "cohort-ssh"],
        "only an admin",
    );

    cli.ok(&["delete", "-f", "c1", "s1"]);
}

/// The first line sshd sends on `port`.
fn ssh_banner(port: u16) -> String {
    use std::io::{BufRead, BufReader};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            stream
                .set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut line = String::new();
            if BufReader::new(stream).read_line(&mut line).is_ok() && !line.is_empty() {
                return line;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "nothing answers on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}
