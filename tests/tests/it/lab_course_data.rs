//! Issue 45: a course's dataset reaches each node of a two-node lab (each its own LXD daemon
//! and pool) once: a later sync of the course (another dataset pushed) finds the volume there
//! and does not fetch it again, and each student's container reads it at `/data/NAME`.

use std::time::Duration;

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::lab::Lab;
use reqwest::Method;
use serde_json::{json, Value};

const COURSE: &str = "ld1";

/// A tar of one file.
fn tarball(path: &str, content: &[u8]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_path(path).expect("path");
    h.set_size(content.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append(&h, content).expect("append");
    tar.into_inner().expect("tar")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_lab_node_receives_a_dataset_once() {
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;
    lab.add_node("west").await;
    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Lab data", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    // One student a node, whatever the load: the first is placed, its node cordoned, and the
    // second placed on the other (placement skips a node row another transaction holds, so a
    // class of two may land on one node on a busy machine).
    let mut placed: Vec<(String, String)> = Vec::new();
    for (username, name) in [("an", "An"), ("bo", "Bo")] {
        let roster = format!("username,name,email,ssh_key\n{username},{name},,\n");
        lab.cluster.import_roster(&teacher, COURSE, roster).await;
        let id = lab.cluster.start_provision(COURSE, &teacher).await;
        lab.succeeds(&json!({"id": id}), Duration::from_secs(300))
            .await;
        let students: Vec<Value> = lab
            .cluster
            .request(
                Method::GET,
                &format!("/courses/{COURSE}/students"),
                &teacher,
            )
            .send()
            .await
            .expect("students")
            .json()
            .await
            .expect("json");
        let student = students
            .iter()
            .find(|s| s["username"] == username)
            .unwrap_or_else(|| panic!("{username} on the roster: {students:?}"));
        let node = student["node"].as_str().expect("node").to_string();
        let instance = student["instance"].as_str().expect("instance").to_string();
        lab.cluster
            .admin(Method::POST, &format!("/nodes/{node}/cordon"), None)
            .await;
        placed.push((node, instance));
    }
    placed.sort();
    let nodes: Vec<&str> = placed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(nodes, ["east", "west"], "one student a node: {placed:?}");
    for node in ["east", "west"] {
        lab.cluster
            .admin(Method::POST, &format!("/nodes/{node}/restore"), None)
            .await;
    }

    let push = |name: &'static str, body: Vec<u8>| {
        let (cluster, teacher) = (&lab.cluster, teacher.clone());
        async move {
            let res = cluster
                .request(Method::POST, &format!("/courses/{COURSE}/data"), &teacher)
                .query(&[("name", name)])
                .body(body)
                .send()
                .await
                .expect("push");
            assert_eq!(res.status().as_u16(), 201);
            let answer: Value = res.json().await.expect("json");
            answer
        }
    };
    let first = push("corpus", tarball("hello.txt", b"lab data\n")).await;
    lab.succeeds(&first["operation"], Duration::from_secs(300))
        .await;
    // A second dataset syncs the course again: the first is found on each node, not fetched.
    let second = push("extra", tarball("more.txt", b"more\n")).await;
    lab.succeeds(&second["operation"], Duration::from_secs(300))
        .await;

    let corpus = format!(
        "dataset-{}",
        &first["dataset"]["sha256"].as_str().expect("sha")[..48]
    );
    for (node_name, instance) in &placed {
        let node = lab.node(node_name);
        let log = node.log();
        assert_eq!(
            log.matches("dataset volume made").count(),
            2,
            "{node_name} made corpus and extra once each:\n{log}"
        );
        let volumes = node.lxc(&[
            "storage", "volume", "list", "cohort", "--format", "csv", "-c", "n",
        ]);
        assert!(
            volumes.lines().any(|v| v == corpus),
            "{node_name}: {volumes}"
        );
        let read = node.lxc(&[
            "exec",
            instance,
            "--",
            "cat",
            "/data/corpus/hello.txt",
            "/data/extra/more.txt",
        ]);
        assert_eq!(read, "lab data\nmore\n", "{node_name}");
    }
}
