//! Issue 42, defect 12: image downloads on a node. One lab node (its own LXD daemon, no image).
//! A download a killed agent left (`<state>/images/*.partial`) is gone once the agent starts
//! again. Then a class of four provisions at once on that node, which lacks the course image:
//! the four creates ask the agent for it together, and it is downloaded from the controller
//! once (the others wait and find it in LXD), counted in the agent's log.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::lab::Lab;
use serde_json::json;

const COURSE: &str = "im1";
const STUDENTS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stale_downloads_are_swept_and_an_image_is_downloaded_once_per_node() {
    let begun = Instant::now();
    let phase = |what: &str| eprintln!("[images {:>5.1} s] {what}", begun.elapsed().as_secs_f64());
    let mut lab = Lab::start(&[]).await;
    lab.add_node("east").await;

    let node = lab.node("east");
    let downloads = node.state_dir().join("images");
    std::fs::create_dir_all(&downloads).expect("images dir");
    let stale = downloads.join("0b8f6a3e-killed.partial");
    std::fs::write(&stale, vec![0u8; 4096]).expect("a stale download");
    node.restart_agent();
    assert!(
        !stale.exists(),
        "the agent kept a killed run's download:\n{}",
        node.log()
    );
    lab.cluster
        .wait_node_state("east", "online", Duration::from_secs(30))
        .await;
    phase("stale download swept");

    lab.cluster.import_base_image("cohort/base").await;
    let teacher = lab.cluster.user("prof", "instructor").await;
    let course = CreateCourse {
        cpu: Some(1),
        memory_mib: Some(256),
        disk_gib: Some(2),
        ..course(COURSE, "Images", "cohort/base")
    };
    lab.cluster.create_course(&teacher, course).await;
    let mut roster = "username,name,email,ssh_key\n".to_string();
    for i in 0..STUDENTS {
        roster.push_str(&format!("s{i},Student,s{i}@uni.edu,\n"));
    }
    lab.cluster.import_roster(&teacher, COURSE, roster).await;
    let id = lab.cluster.start_provision(COURSE, &teacher).await;
    lab.succeeds(&json!({"id": id}), Duration::from_secs(300))
        .await;
    phase("provisioned");

    let log = lab.nodes[0].log();
    let downloads_made = log.matches("downloading image").count();
    let asked = downloads_made + log.matches("image already here").count();
    assert_eq!(
        downloads_made, 1,
        "the image was downloaded {downloads_made} times for one node ({asked} asks):\n{log}"
    );
    assert!(
        asked > 1,
        "the creates never asked together, so nothing was tested:\n{log}"
    );
    let left: Vec<_> = std::fs::read_dir(lab.nodes[0].state_dir().join("images"))
        .expect("images dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "downloads left behind: {left:?}");
    let listed = lab.nodes[0].lxc(&["list", "-f", "csv", "-c", "n"]);
    assert_eq!(listed.lines().count(), STUDENTS, "{listed}");
}
