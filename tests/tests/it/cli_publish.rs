//! `cohort publish` against a real controller and agent: a stopped instance becomes an image in
//! the controller's catalog (tarball stored under its SHA-256, the node recorded as holding it),
//! and a new instance launched from it has the file written before publishing.

use crate::cli_support;

use cli_support::OneNode;
use sha2::Digest;

#[test]
fn publish_a_stopped_instance_and_launch_from_it() {
    let node = OneNode::start();
    let cli = &node.cli;
    cli.ok(&["-q", "launch", "cohort/base", "c1"]);
    cli.ok(&[
        "exec",
        "c1",
        "--",
        "sh",
        "-c",
        "echo before-publish > /root/marker",
    ]);

    // Running: refused, nothing made.
    cli.fails(
        &["publish", "c1", "--alias", "lab/custom"],
        "stop it before publishing",
    );
    assert!(!cli
        .ok(&["image", "list", "-f", "csv"])
        .contains("lab/custom"));

    cli.ok(&["stop", "c1"]);
    let out = cli.ok(&[
        "-q",
        "publish",
        "lab:c1",
        "lab:",
        "--alias",
        "lab/custom",
        "description=made in a test",
    ]);
    let fingerprint = out
        .trim()
        .strip_prefix("Instance published with fingerprint: ")
        .unwrap_or_else(|| panic!("publish printed {out:?}"))
        .to_string();
    assert_eq!(fingerprint.len(), 64);
    // The node keeps the image; its project shares the default project's images, so it is
    // deleted there when the test ends, passed or not.
    let _kept = KeptImage(fingerprint.clone());

    // The catalog lists it, held by node1; the stored tarball is the image.
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("lab/custom,"))
        .unwrap_or_else(|| panic!("image not listed: {listed}"));
    assert!(
        row.contains(&fingerprint[..12])
            && row.contains("made in a test")
            && row.ends_with("node1"),
        "{row}"
    );
    let stored = node
        .controller
        .state
        .path()
        .join("images")
        .join(format!("{fingerprint}.tar"));
    let bytes = std::fs::read(&stored).expect("tarball in the catalog directory");
    assert_eq!(hex::encode(sha2::Sha256::digest(&bytes)), fingerprint);
    // Kept on the node under the alias, so launching there needs no fetch.
    assert!(node
        .lxd
        .lxc(&["image", "list", "-f", "csv", "-c", "lf"])
        .contains("lab/custom"));

    // An alias taken is refused.
    cli.fails(&["publish", "c1", "--alias", "lab/custom"], "exists");

    cli.ok(&["-q", "launch", "lab/custom", "c2"]);
    assert_eq!(
        cli.ok(&["exec", "c2", "--", "cat", "/root/marker"]),
        "before-publish\n"
    );
    assert!(cli.ok(&["info", "c2"]).contains("Status: RUNNING"));
    cli.ok(&["delete", "-f", "c1", "c2"]);
}

/// Deletes an image from the daemon's default project on drop.
struct KeptImage(String);

impl Drop for KeptImage {
    fn drop(&mut self) {
        let _ = cohort_e2e::lxd::lxc_output(&["image", "delete", &self.0]);
    }
}
