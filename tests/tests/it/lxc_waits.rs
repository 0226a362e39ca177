//! Issue 46: a wait on an operation through the LXD-style API with no timeout (pylxd sends none,
//! `lxc` sends -1) lasts until the operation ends, as LXD's does, not the REST API's default
//! 30 s. pylxd takes the wait's answer as the end: under load its lifecycle went on while a
//! change still ran (a delete after a stop then met LXD's 400 "running").

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use crate::cli_support::{Lxc, OneNode};

#[test]
fn a_wait_without_a_timeout_lasts_until_the_operation_ends() {
    let node = OneNode::start_with_lxd_api();
    let cli = &node.cli;
    let address = node.controller.lxd_address.clone().expect("LXD-style API");
    let lxc = Lxc::trusted_by(cli, "waiter", None);
    // No node takes instances: a new one waits in the queue, its operation unfinished.
    cli.ok(&["-q", "cluster", "evacuate", "node1", "--force"]);
    let (created, status) = lxc.curl_with(
        &address,
        "/1.0/instances",
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"name": "late1", "source": {"type": "image", "alias": "cohort/base"},
                "config": {"limits.memory": "256MiB"}}"#,
        ],
    );
    assert_eq!(status, 202, "{created}");
    let operation = created["operation"]
        .as_str()
        .expect("operation")
        .to_string();
    let (tx, rx) = mpsc::channel();
    let conf = lxc.conf.path().to_path_buf();
    let url = format!("https://{address}{operation}/wait");
    std::thread::spawn(move || {
        let out = Command::new("curl")
            .args(["-sk", "--max-time", "280", "--cert"])
            .arg(conf.join("client.crt"))
            .arg("--key")
            .arg(conf.join("client.key"))
            .arg(&url)
            .output()
            .expect("run curl");
        let _ = tx.send(String::from_utf8_lossy(&out.stdout).into_owned());
    });
    // Past the REST API's default wait of 30 s, the wait still waits.
    if let Ok(early) = rx.recv_timeout(Duration::from_secs(40)) {
        panic!("the wait answered before the operation ended: {early}");
    }
    cli.ok(&["-q", "cluster", "restore", "node1", "--force"]);
    let answer = rx
        .recv_timeout(Duration::from_secs(240))
        .expect("the wait answers once the instance is made");
    let waited: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(waited["metadata"]["status"], "Success", "{waited}");
    assert!(node.lxd.instance_names().contains(&"late1".to_string()));
}
