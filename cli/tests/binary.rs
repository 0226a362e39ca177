//! The `cohort` binary as a user runs it: `remote add` pins the certificate it showed, a server
//! with another certificate is refused, and every failure is `Error: ...` on stderr with exit 1.

mod common;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use cohort_cli::config::Config;
use cohort_cli::tls::fingerprint;

struct Cohort {
    conf: tempfile::TempDir,
}

impl Cohort {
    fn new() -> Self {
        Cohort {
            conf: tempfile::tempdir().unwrap(),
        }
    }

    fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .args(args)
            .env("COHORT_CONF", self.conf.path())
            .env_remove("COHORT_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, "")
    }

    fn config(&self) -> Config {
        Config::load(&self.conf.path().join("config.yml")).unwrap()
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit code 1 and a single `Error: <message>` on stderr, as lxc fails.
fn assert_lxc_error(out: &Output, message: &str) {
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr(out));
    let err = stderr(out);
    assert!(err.starts_with("Error: "), "{err}");
    assert!(err.contains(message), "expected {message:?} in {err:?}");
}

#[test]
fn remote_add_pins_and_later_refuses_another_certificate() {
    let server = common::start();
    let cohort = Cohort::new();
    let add = cohort.run(&[
        "remote",
        "add",
        "lab",
        &server.url,
        "--token",
        "T",
        "--accept-certificate",
    ]);
    assert!(add.status.success(), "{}", stderr(&add));

    let config = cohort.config();
    assert_eq!(config.default_remote, "lab");
    assert_eq!(
        config.remote("lab").unwrap().fingerprint,
        fingerprint(&server.cert)
    );
    assert_eq!(stdout(&cohort.run(&["remote", "get-default"])), "lab\n");
    let csv = stdout(&cohort.run(&["remote", "list", "-f", "csv"]));
    assert_eq!(
        csv,
        format!("lab (current),{},cohort,token,NO,NO,NO\n", server.url)
    );

    // Same address, new certificate (a man in the middle, or a controller re-keyed).
    let impostor = common::start();
    let mut config = cohort.config();
    config.remotes.get_mut("lab").unwrap().addr = impostor.url.clone();
    config.save().unwrap();
    let out = cohort.run(&["info"]);
    assert_lxc_error(&out, "certificate fingerprint mismatch");
}

#[test]
fn remote_add_prompt_shows_fingerprint_and_no_keeps_nothing() {
    let server = common::start();
    let cohort = Cohort::new();
    let out = cohort.run_with_stdin(
        &["remote", "add", "lab", &server.url, "--token", "T"],
        "n\n",
    );
    assert!(
        stdout(&out).contains(&fingerprint(&server.cert)),
        "{}",
        stdout(&out)
    );
    assert_lxc_error(&out, "Server certificate NACKed by user");
    assert!(cohort.config().remotes.is_empty());

    let out = cohort.run_with_stdin(
        &["remote", "add", "lab", &server.url, "--token", "T"],
        "y\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(cohort.config().remotes.contains_key("lab"));
}

#[test]
fn errors_are_lxc_shaped() {
    let server = common::start();
    let cohort = Cohort::new();
    assert_lxc_error(&cohort.run(&["list"]), "cohort remote add");
    let add = cohort.run(&[
        "remote",
        "add",
        "lab",
        &server.url,
        "--token",
        "T",
        "--accept-certificate",
    ]);
    assert!(add.status.success(), "{}", stderr(&add));
    assert_lxc_error(
        &cohort.run(&["info", "nope:c1"]),
        "The remote \"nope\" doesn't exist",
    );
    assert_lxc_error(
        &cohort.run(&["list", "-c", "nx"]),
        "Unknown column shorthand char 'x'",
    );
    assert_lxc_error(
        &cohort.run(&["list", "-c", "n4"]),
        "Column '4' (IPv4 address)",
    );
    // The test server answers the controller's 404 body for any other route.
    assert_lxc_error(
        &cohort.run(&["info", "c1"]),
        "Instance not found (field: name)",
    );
    assert_lxc_error(
        &cohort.run(&["remote", "remove", "lab"]),
        "Can't remove the default remote",
    );
    assert_lxc_error(
        &cohort.run(&["remote", "add", "x", "http://127.0.0.1:1", "--token", "T"]),
        "https://",
    );
}

#[test]
fn completion_scripts_name_the_verbs() {
    let cohort = Cohort::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = cohort.run(&["completion", shell]);
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(
            script.contains("provision") && script.contains("evacuate"),
            "{shell}"
        );
    }
}
