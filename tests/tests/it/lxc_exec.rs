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
    // The screen as it arrives, so each line is typed once the shell has shown what comes
    // before it (keys typed before the session is up would be lost on a loaded machine).
    let shown = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let mut screen_out = term.stdout.take().unwrap();
    let reader = {
        let shown = shown.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = std::io::Read::read(&mut screen_out, &mut buf) {
                if n == 0 {
                    break;
                }
                shown.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let mut type_after = |seen: &str, text: &[u8]| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !String::from_utf8_lossy(&shown.lock().unwrap()).contains(seen) {
            assert!(
                Instant::now() < deadline,
                "{seen:?} not shown within 60 s: {}",
                String::from_utf8_lossy(&shown.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        keys.write_all(text).unwrap();
        keys.flush().unwrap();
    };
    type_after("# ", b"stty size; tty\n");
    type_after("/dev/pts/", b"sleep 60\n");
    // The sleep started (no prompt to wait for while it runs).
    std::thread::sleep(Duration::from_millis(1500));
    type_after("sleep 60", b"\x03");
    type_after("^C", b"echo after-$((40+2))\n");
    type_after("after-42", b"exit 3\n");
    drop(keys);
    let status = term.wait().unwrap();
    reader.join().unwrap();
    let screen = String::from_utf8_lossy(&shown.lock().unwrap()).into_owned();
    assert_eq!(status.code(), Some(3), "{screen}");
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
