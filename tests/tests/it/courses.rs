//! Issue 5, end to end with real processes: a course of 12 students on two nodes, every student
//! logging in over ssh with their own key through the exported endpoint, idempotent
//! re-provisioning, drift repaired, and bad rosters refused whole.

use std::collections::HashMap;
use std::time::Duration;

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::ssh::SshKey;
use reqwest::Method;
use serde_json::Value;

const STUDENTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_class_of_twelve_on_two_nodes_logs_in_with_their_own_keys() {
    let cluster = Cluster::start(2).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof", "instructor").await;

    let res = cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..course("cs101", "Systems", "cohort/base")
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
    let mut roster = String::from("username,name,email,ssh_key\r\n");
    for (i, key) in keys.iter().enumerate() {
        roster.push_str(&format!(
            "s{i:02},Student {i},s{i:02}@uni.edu,{}\r\n",
            key.public_key()
        ));
    }
    let report: Value = cluster
        .request(Method::POST, "/courses/cs101/roster", &teacher)
        .header("content-type", "text/csv")
        .body(format!("\u{feff}{roster}"))
        .send()
        .await
        .expect("roster")
        .json()
        .await
        .expect("roster report");
    assert_eq!(
        report["added"].as_array().map(Vec::len),
        Some(STUDENTS),
        "{report}"
    );

    let op = cluster.provision("cs101", &teacher).await;
    assert_eq!(
        op["status"],
        "success",
        "{op}\n{}",
        cluster.controller_log()
    );
    assert_eq!(op["items"].as_array().map(Vec::len), Some(STUDENTS));

    // Both nodes got students (spread placement).
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
    assert_eq!(per_node.len(), 2, "{per_node:?}");

    let csv = cluster
        .request(Method::GET, "/courses/cs101/endpoints?format=csv", &teacher)
        .send()
        .await
        .expect("endpoints")
        .text()
        .await
        .expect("csv");
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("username,instance,node,host,port,ssh_command,password,known_hosts")
    );
    let endpoints: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    assert_eq!(endpoints.len(), STUDENTS);
    for (i, row) in endpoints.iter().enumerate() {
        let (user, host, port) = (&row[0], &row[3], row[4].parse::<u16>().expect("port"));
        assert_eq!(user, &format!("s{i:02}"));
        let out = keys[i].run_when_up(
            host,
            port,
            user,
            "whoami; hostname",
            Duration::from_secs(60),
        );
        assert!(
            out.status.success(),
            "{user} cannot log in: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{user}\n{}\n", row[1])
        );
        // The export's known_hosts line is the container's own key: strict checking passes.
        let host_key = row[7]
            .strip_prefix(&format!("[{host}]:{port} "))
            .unwrap_or_else(|| panic!("known_hosts cell {:?}", row[7]));
        assert!(host_key.starts_with("ssh-ed25519 "), "{host_key}");
        let verified = keys[i].run_verified(host, port, host_key, user, "true");
        assert!(
            verified.status.success(),
            "{user}: the exported host key is not the one served: {}",
            String::from_utf8_lossy(&verified.stderr)
        );
    }
    let known_hosts = cluster
        .request(
            Method::GET,
            "/courses/cs101/endpoints?format=known-hosts",
            &teacher,
        )
        .send()
        .await
        .expect("endpoints")
        .text()
        .await
        .expect("known_hosts");
    let from_csv: Vec<&str> = endpoints.iter().map(|row| row[7].as_str()).collect();
    assert_eq!(known_hosts.lines().collect::<Vec<_>>(), from_csv);
    let distinct: std::collections::HashSet<&str> = from_csv
        .iter()
        .map(|l| l.split(' ').nth(2).unwrap_or_default())
        .collect();
    assert_eq!(
        distinct.len(),
        STUDENTS,
        "every container has its own host key"
    );
    // A student's key does not open a classmate's container.
    let (row1, port1) = (&endpoints[1], endpoints[1][4].parse::<u16>().expect("port"));
    let denied = keys[0].run(&row1[3], port1, &row1[0], "true");
    assert_eq!(
        denied.status.code(),
        Some(255),
        "s00's key opened s01's container"
    );

    // A second provision changes nothing.
    let again = cluster.provision("cs101", &teacher).await;
    assert_eq!(again["status"], "success");
    assert_eq!(again["items"].as_array().map(Vec::len), Some(0), "{again}");

    // A container deleted behind Cohort's back is re-created, and only that one.
    let victim = &endpoints[5];
    let node = cluster
        .nodes
        .iter()
        .find(|n| n.name == victim[2])
        .expect("victim's node");
    node.lxd.lxc(&["delete", "--force", &victim[1]]);
    let repair = cluster.provision("cs101", &teacher).await;
    assert_eq!(repair["status"], "success", "{repair}");
    let items = repair["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{repair}");
    assert_eq!(items[0]["target"], victim[1].as_str());
    let port = victim[4].parse::<u16>().expect("port");
    keys[5].forget_hosts();
    let out = keys[5].run_when_up(
        &victim[3],
        port,
        &victim[0],
        "whoami",
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "re-created container refuses its student: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roster_with_bad_rows_is_refused_whole_with_row_numbers() {
    let cluster = Cluster::start(0).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof2", "instructor").await;
    cluster
        .request(Method::POST, "/courses", &teacher)
        .json(&course("cs102", "Bad rosters", "cohort/base"))
        .send()
        .await
        .expect("create course");
    let good = SshKey::generate().public_key();
    let roster = format!(
        "username,name,email,ssh_key\n\
         ok1,Fine,ok1@uni.edu,{good}\n\
         Bad User,Nope,,\n\
         cmd,Cmd,cmd@uni.edu,command=\"/bin/sh\" {good}\n\
         ok1,Twice,,\n\
         eve,=HYPERLINK(\"http://evil\"),eve@uni.edu,\n"
    );
    let res = cluster
        .request(Method::POST, "/courses/cs102/roster", &teacher)
        .body(roster)
        .send()
        .await
        .expect("roster");
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("error body");
    let message = body["error"]["message"].as_str().expect("message");
    for needle in [
        "row 3",
        "row 4",
        "row 5",
        "row 6",
        "options",
        "already appears",
    ] {
        assert!(
            message.contains(needle),
            "{needle:?} missing from {message}"
        );
    }
    assert!(body["error"]["field"]
        .as_str()
        .is_some_and(|f| f.contains("row 3")));
    let course: Value = cluster
        .request(Method::GET, "/courses/cs102", &teacher)
        .send()
        .await
        .expect("course")
        .json()
        .await
        .expect("course json");
    assert_eq!(course["students"], 0, "a bad roster enrolled someone");
    let users: Value = cluster.admin(Method::GET, "/users", None).await;
    assert!(
        !users
            .as_array()
            .expect("users")
            .iter()
            .any(|u| u["username"] == "ok1"),
        "a bad roster created a user"
    );
}
