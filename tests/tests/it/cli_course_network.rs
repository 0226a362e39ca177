//! A course's network policy end to end: set with `cohort course create|set --egress --ssh-from`,
//! stored and audited by a real controller, sent to a real agent on a node network, and applied
//! by it to the running containers within seconds, without a restart; the students' SSH
//! endpoints are the node's NAT forwards. Then the course's limits from `cohort course limits`.

use crate::cli_support;
use crate::net_support;

use std::time::{Duration, Instant};

use cli_support::OneNode;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestNetwork;
use net_support::{dns_script, fetch_script, forkproxies_on, init_pid, python_in, WebServer};

#[test]
fn a_course_policy_is_set_stored_audited_and_applied_to_running_containers() {
    let mut net = TestNetwork::claim();
    let internet = net.netns();
    let lab = net.netns();
    let web_port = 20000 + (std::process::id() % 10000) as u16;
    let web = WebServer::start(&internet, web_port);
    let node = OneNode::start_on(Some(&net));
    let (lxd, cli) = (&node.lxd, &node.cli);

    cli.fails(
        &[
            "course",
            "create",
            "cs101",
            "--title",
            "Exam",
            "--image",
            "cohort/base",
            "--ssh-from",
            "10.0.0.0/33",
        ],
        "network.ssh_from[0]",
    );
    cli.ok(&[
        "course",
        "create",
        "cs101",
        "--title",
        "Exam",
        "--image",
        "cohort/base",
        "--memory",
        "256MiB",
        "--disk",
        "2GiB",
        "--egress",
        "none",
        "--ssh-from",
        &format!("{}/32", lab.address),
    ]);
    let shown = cli.ok(&["course", "show", "cs101"]);
    assert!(shown.contains("egress: none"), "{shown}");

    let key = SshKey::generate();
    let dir = tempfile::tempdir().unwrap();
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        format!(
            "username,name,email,ssh_key\nalice,Alice,,{}\n",
            key.public_key()
        ),
    )
    .unwrap();
    cli.ok(&["course", "roster", "cs101", roster.to_str().unwrap()]);
    cli.ok(&["course", "provision", "cs101", "--wait", "--quiet"]);

    // The endpoint is the node's NAT forward: from the lab (inside ssh_from) alice logs in with
    // exactly what the export says; no forkproxy carries it.
    let csv = cli.ok(&["course", "endpoints", "cs101"]);
    let row = csv
        .lines()
        .find(|l| l.starts_with("alice,"))
        .expect("alice's row");
    let fields: Vec<&str> = row.split(',').collect();
    let (host, port) = (fields[3], fields[4].parse::<u16>().unwrap());
    assert_eq!(host, net.gateway().to_string(), "{row}");
    let out = key.run_in(&lab.name, host, port, "alice", "whoami");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "alice\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(forkproxies_on(port), 0);
    // From the outside (not in ssh_from): refused.
    let out = key.run_in(&internet.name, host, port, "alice", "whoami");
    assert_eq!(out.status.code(), Some(255), "the outside got in");

    // Egress none: the exam container fetches nothing.
    let instance = lxd
        .lxc(&["list", "-f", "csv", "-c", "n"])
        .trim()
        .to_string();
    let (ok, body) = python_in(lxd, &instance, &fetch_script(&web.url, 3));
    assert!(!ok, "egress none let a fetch through: {body}");
    // Nor a DNS answer (issue 47, item 11): the bridge's resolver forwards upstream, so a name
    // could carry data out.
    let own_name = format!("{instance}.lxd");
    let (ok, body) = python_in(lxd, &instance, &dns_script(&own_name, 3));
    assert!(!ok, "egress none let a DNS query through: {body}");

    // Opened by the instructor: applied within seconds, without a restart.
    let pid = init_pid(lxd, &instance);
    let asked = Instant::now();
    cli.ok(&["course", "set", "cs101", "--egress", "open"]);
    loop {
        let (ok, body) = python_in(lxd, &instance, &fetch_script(&web.url, 2));
        if ok {
            assert_eq!(body, "rows: 42\n");
            break;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "still closed: {body}"
        );
    }
    eprintln!("egress opened in {:?}", asked.elapsed());
    let (ok, body) = python_in(lxd, &instance, &dns_script(&own_name, 3));
    assert!(ok, "egress open, the bridge's DNS does not answer: {body}");
    assert_eq!(init_pid(lxd, &instance), pid, "the container was restarted");
    let shown = cli.ok(&["course", "show", "cs101"]);
    assert!(shown.contains("egress: open"), "{shown}");
    assert!(
        shown.contains(&format!("{}/32", lab.address)),
        "ssh_from kept: {shown}"
    );

    cli.fails(
        &["course", "set", "cs101", "--egress", "mirror:80"],
        "network.egress.allow[0]",
    );
    cli.fails(&["course", "set", "cs101"], "nothing to set");

    // The course's limits from the CLI: the running container is to get the new memory live,
    // and a refused value is an `Error:` line naming its field.
    let out = cli.ok(&["course", "limits", "cs101", "--memory", "384MiB"]);
    assert!(
        out.contains("1 container(s) already made get the new cores and memory live"),
        "{out}"
    );
    assert!(cli
        .ok(&["course", "show", "cs101"])
        .contains("memory_mib: 384"));
    cli.fails(&["course", "limits", "cs101", "--cpu", "0"], "cpu");
    cli.fails(&["course", "limits", "cs101"], "nothing to set");
    let audit = cli.ok(&["audit", "list", "-f", "csv"]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("set_network") && l.contains("cs101")),
        "{audit}"
    );
}
