//! Issue 42, defect 3: a create the daemon is still running when the agent stops waiting. One lab
//! node (its own LXD daemon with a `dir` pool: every create unpacks the image, seconds of work)
//! whose agent waits only 1 s for a create (`COHORT_AGENT_CREATE_WAIT_S=1`, the test setting of
//! the 300 s wait). The class provisions: each create outlasts the agent's wait, the controller
//! asks again while the daemon still creates. Before the fix the retry took the half-made
//! container for made (a host key written into a root filesystem still being unpacked, a start
//! refused as "busy", attempts spent towards `error`); now the retry waits on the daemon's
//! operation, and the controller counts no attempt for it (no step retried as a failure, from
//! its metrics). The class ends complete: each student one running container whose host key is
//! the one the controller recorded, sshd up, every file owned inside the container's range, no
//! item retried as a failure, nothing else on the node.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::lab::Lab;
use reqwest::Method as M;
use serde_json::{json, Value};

const COURSE: &str = "cw1";
const STUDENTS: [&str; 2] = ["s0", "s1"];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_waits_for_the_daemons_create_instead_of_acting_on_a_half_made_container() {
    let begun = Instant::now();
    let phase =
        |what: &str| eprintln!("[creating {:>5.1} s] {what}", begun.elapsed().as_secs_f64());
    let mut lab = Lab::start(&[]).await;
    lab.agent_env = vec![("COHORT_AGENT_CREATE_WAIT_S".into(), "1".into())];
    lab.add_node("east").await;
    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Creating", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let mut roster = "username,name,email,ssh_key\n".to_string();
    for s in STUDENTS {
        roster.push_str(&format!("{s},Student,{s}@uni.edu,\n"));
    }
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let id = lab.cluster.start_provision(COURSE, &teacher).await;
    let done = lab
        .succeeds(&json!({"id": id}), Duration::from_secs(240))
        .await;
    phase("provisioned");
    let log = lab.agent_logs();
    assert!(
        log.contains("LXD still creates the instance"),
        "no create outlasted the agent's 1 s wait, so nothing was tested:\n{log}"
    );
    // A create still running is a wait, never a failed attempt: no step was retried.
    let metrics = lab.cluster.scrape(&lab.cluster.admin_token).await;
    let steps = |outcome: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| {
                l.contains("operation_steps") && l.contains(&format!("outcome=\"{outcome}\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    eprintln!(
        "steps: {} retried, {} waited; {} waits of the agent ran out, {} retries waited on a create",
        steps("retry"),
        steps("wait"),
        log.matches("LXD still creates the instance").count(),
        log.matches("waiting for the daemon's create of it").count()
    );
    let warnings: Vec<String> = lab
        .cluster
        .controller_log()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .map(str::to_string)
        .collect();
    assert_eq!(
        steps("retry"),
        0,
        "a step was retried as a failure (a create still running counted as a failed attempt):\n{}\n{log}",
        warnings.join("\n")
    );
    assert!(
        log.contains("waiting for the daemon's create of it"),
        "no retry waited on the daemon's create:\n{log}"
    );
    let items = done["items"].as_array().cloned().unwrap_or_default();
    for item in &items {
        assert!(
            item["error"].is_null() || item["error"] == "",
            "an item recorded a failure: {done}"
        );
    }

    let node = &lab.nodes[0];
    let listed = node.lxc(&["list", "-f", "csv", "-c", "ns"]);
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort();
    let expected: Vec<String> = STUDENTS
        .iter()
        .map(|s| format!("{COURSE}-{s},RUNNING"))
        .collect();
    assert_eq!(
        names, expected,
        "one running container per student, nothing else"
    );
    for s in STUDENTS {
        let name = format!("{COURSE}-{s}");
        let inst: Value = lab
            .cluster
            .admin(M::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(inst["observed_state"], "running", "{inst}");
        let recorded = inst["ssh_host_key"]
            .as_str()
            .expect("a host key")
            .to_string();
        let inside = node.lxc(&[
            "exec",
            &name,
            "--",
            "cat",
            "/etc/ssh/ssh_host_ed25519_key.pub",
        ]);
        let key = |k: &str| k.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        assert_eq!(
            key(&inside),
            key(&recorded),
            "{name}'s host key is the recorded one"
        );
        let unowned = node.lxc(&[
            "exec", &name, "--", "find", "/", "-xdev", "(", "-nouser", "-o", "-nogroup", ")",
            "-print", "-quit",
        ]);
        assert_eq!(unowned.trim(), "", "{name} has files outside its id range");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = node.lxc_output(&["exec", &name, "--", "systemctl", "is-active", "ssh"]);
            if String::from_utf8_lossy(&out.stdout).trim() == "active" {
                break;
            }
            assert!(Instant::now() < deadline, "sshd is not active in {name}");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let orphans: Value = lab.cluster.admin(M::GET, "/orphans", None).await;
    assert_eq!(
        orphans.as_array().map(Vec::len).unwrap_or(0),
        0,
        "{orphans}"
    );
    phase("checked");
}
