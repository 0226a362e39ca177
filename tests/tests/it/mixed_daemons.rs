//! Issue 30, end to end with real processes: one controller, one LXD node and one Incus node; a
//! class spread over both, every student logging in over ssh with their own key, and each node
//! reporting its daemon and version to the controller.

use std::collections::HashMap;
use std::time::Duration;

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestLxd;
use reqwest::Method;
use serde_json::Value;

const STUDENTS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_class_on_an_lxd_node_and_an_incus_node_logs_in() {
    let mut cluster = Cluster::start(0).await;
    cluster
        .add_node_in("on-lxd", TestLxd::on(TestDaemon::Lxd))
        .await;
    cluster
        .add_node_in("on-incus", TestLxd::on(TestDaemon::Incus))
        .await;
    cluster.import_base_image("cohort/base").await;

    // Each node says which daemon it runs, once its inventory has been polled.
    let admin = cluster.admin_token.clone();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let nodes = loop {
        let nodes: Vec<Value> = cluster
            .request(Method::GET, "/nodes", &admin)
            .send()
            .await
            .expect("nodes")
            .json()
            .await
            .expect("nodes JSON");
        if nodes.iter().all(|n| !n["daemon"].is_null()) || std::time::Instant::now() > deadline {
            break nodes;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let daemon_of = |name: &str| -> (String, String) {
        let n = nodes
            .iter()
            .find(|n| n["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {nodes:?}"));
        (
            n["daemon"].as_str().unwrap_or_default().to_string(),
            n["lxd_version"].as_str().unwrap_or_default().to_string(),
        )
    };
    let (lxd, lxd_version) = daemon_of("on-lxd");
    let (incus, incus_version) = daemon_of("on-incus");
    assert_eq!(lxd, "lxd");
    assert!(lxd_version.starts_with("5."), "{lxd_version}");
    assert_eq!(incus, "incus");
    assert!(incus_version.starts_with("6."), "{incus_version}");

    // Placement prefers a node that holds the image: wait until both report holding it, so the
    // class spreads by load rather than by which node's poll came first.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let images: Vec<Value> = cluster
            .request(Method::GET, "/images", &admin)
            .send()
            .await
            .expect("images")
            .json()
            .await
            .expect("images JSON");
        let holders = images
            .iter()
            .find(|i| i["alias"] == "cohort/base")
            .and_then(|i| i["nodes"].as_array())
            .map_or(0, Vec::len);
        if holders == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "both nodes never reported cohort/base: {images:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let teacher = cluster.user("prof", "instructor").await;
    let res = cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("mix1", "Two daemons", "cohort/base")
        })
        .send()
        .await
        .expect("create course");
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let keys: Vec<SshKey> = (0..STUDENTS).map(|_| SshKey::generate()).collect();
    let mut roster = String::from("username,name,email,ssh_key\n");
    for (i, key) in keys.iter().enumerate() {
        roster.push_str(&format!(
            "m{i},Student {i},m{i}@uni.edu,{}\n",
            key.public_key()
        ));
    }
    let res = cluster
        .request(Method::POST, "/courses/mix1/roster", &teacher)
        .header("content-type", "text/csv")
        .body(roster)
        .send()
        .await
        .expect("roster");
    assert!(
        res.status().is_success(),
        "{}",
        res.text().await.unwrap_or_default()
    );

    let id = cluster.start_provision("mix1", &teacher).await;
    let op = cluster.wait_operation(&id, Duration::from_secs(300)).await;
    assert_eq!(
        op["status"],
        "success",
        "{op}\n{}",
        cluster.controller_log()
    );
    let per_node: HashMap<String, usize> =
        op["items"]
            .as_array()
            .into_iter()
            .flatten()
            .fold(HashMap::new(), |mut m, i| {
                *m.entry(i["node"].as_str().unwrap_or("").to_string())
                    .or_default() += 1;
                m
            });
    assert_eq!(
        per_node
            .keys()
            .map(String::as_str)
            .collect::<std::collections::BTreeSet<_>>(),
        ["on-incus", "on-lxd"].into(),
        "spread over both daemons: {per_node:?}"
    );

    let csv = cluster
        .request(Method::GET, "/courses/mix1/endpoints?format=csv", &teacher)
        .send()
        .await
        .expect("endpoints")
        .text()
        .await
        .expect("csv");
    let rows: Vec<Vec<String>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(rows.len(), STUDENTS, "{csv}");
    for row in &rows {
        let (user, node, host) = (&row[0], &row[2], &row[3]);
        let port: u16 = row[4].parse().expect("port");
        let i: usize = user[1..].parse().expect("roster name");
        let out = keys[i].run_when_up(
            host,
            port,
            user,
            "whoami; hostname",
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{user} on {node} cannot log in: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{user}\n{}\n", row[1])
        );
    }
    // The Incus node's containers are Incus's: its own client lists them in the node's project.
    let on_incus = &cluster
        .nodes
        .iter()
        .find(|n| n.name == "on-incus")
        .expect("node")
        .lxd;
    let listed = on_incus.lxc(&["list", "-c", "n", "--format", "csv"]);
    assert_eq!(
        listed.lines().count(),
        per_node["on-incus"],
        "incus list in the node's project: {listed}"
    );
}
