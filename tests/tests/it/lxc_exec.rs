//! `lxc exec` (the real 5.0.2 client) through Cohort's LXD-style API to a container on a node:
//! non-interactive (stdout and stderr apart, stdin passed, the exit code propagated) and
//! interactive in a pseudo-terminal made by `script` (window size, typed commands, Ctrl-C),
//! relayed over the exec websockets to the node's LXD. Who may exec where is the REST API's rule.

use crate::cli_support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{Lxc, OneNode};

#[test]
fn lxc_exec_runs_commands_in_the_fleet() {
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
    let lxc = Lxc::trusted_by(cli, "admin-laptop", None);

    // Non-interactive: the container's own hostname, stdout and stderr apart, the exit code.
    assert_eq!(
        lxc.ok(&["exec", "lab:web1", "--", "hostname"]).trim(),
        "web1"
    );
    let out = lxc.run(&[
        "exec",
        "lab:web1",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    // --env, --cwd and stdin from a pipe.
    let mut child = lxc
        .command(&[
            "exec",
            "lab:web1",
            "--env",
            "GREETING=hello",
            "--cwd",
            "/tmp",
            "--",
            "sh",
            "-c",
            "echo $GREETING $(pwd); tr a-z A-Z",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run lxc exec");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"piped in\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello /tmp\nPIPED IN\n"
    );

    // Interactive in a pseudo-terminal of 27 rows and 91 columns: the size reaches the
    // container, typed commands run, Ctrl-C interrupts the foreground command, `exit` ends it.
    let started = Instant::now();
    let lxc_conf = lxc.conf.path().display().to_string();
    let mut term = Command::new("script")
        .args([
            "-qec",
            &format!("stty rows 27 cols 91; LXD_CONF={lxc_conf} lxc exec lab:web1 -- sh"),
            "/dev/null",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run script");
    let mut keys = term.stdin.take().unwrap();
    let mut type_in = |text: &[u8]| {
        std::thread::sleep(Duration::from_millis(1500));
        keys.write_all(text).unwrap();
        keys.flush().unwrap();
    };
    type_in(b"stty size; tty\n");
    type_in(b"sleep 60\n");
    type_in(b"\x03");
    type_in(b"echo after-$((40+2))\n");
    type_in(b"exit 3\n");
    drop(keys);
    let out = term.wait_with_output().unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{screen}");
    assert!(screen.contains("27 91"), "{screen}");
    assert!(screen.contains("/dev/pts/"), "{screen}");
    assert!(screen.contains("after-42"), "{screen}");
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "Ctrl-C did not interrupt the sleep"
    );

    // A student's client may not exec in someone else's container; a missing one is LXD's 404.
    cli.ok(&["user", "create", "sam", "--role", "student"]);
    let sam = Lxc::trusted_by(cli, "sams-laptop", Some("sam"));
    let out = sam.run(&["exec", "lab:web1", "--", "hostname"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    lxc.fails(&["exec", "lab:nothere", "--", "true"], "not found");
}
