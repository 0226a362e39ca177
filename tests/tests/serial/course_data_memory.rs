//! Issue 45: a 2 GiB dataset push streams through the controller to its data store without
//! growing the controller's memory by 64 MiB, and the stored tarball hashes as what was sent.
//! Here because it writes 2 GiB and keeps both cores busy for its length.

use std::time::Duration;

use cohort_e2e::bodies::course;
use cohort_e2e::cluster::Cluster;
use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Peak resident memory of a process, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2_gib_push_keeps_the_controllers_memory_bounded() {
    let _alone = crate::alone().await;
    let cluster = Cluster::start(0).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-big", "instructor").await;
    cluster
        .create_course(&teacher, course("bigdata", "Big", "cohort/base"))
        .await;
    cluster
        .admin(
            Method::PUT,
            "/courses/bigdata/data-quota",
            Some(json!({"quota_mib": 4096})),
        )
        .await;

    // One 2 GiB file of zeros in a tar, made as it is sent.
    const CHUNK: usize = 1 << 20;
    let size: u64 = 2 << 30;
    let mut header = tar::Header::new_gnu();
    header.set_path("big.bin").expect("path");
    header.set_size(size);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    let head = header.as_bytes().to_vec();
    let chunks = (size / CHUNK as u64) as usize;
    let mut hash = Sha256::new();
    hash.update(&head);
    let zeros = vec![0u8; CHUNK];
    for _ in 0..chunks {
        hash.update(&zeros);
    }
    // The two zero blocks that end an archive.
    hash.update([0u8; 1024]);
    let sent = hex::encode(hash.finalize());
    // Each chunk made when it is sent: the test holds a few MiB, not 2 GiB.
    let parts = std::iter::once(head)
        .chain((0..chunks).map(|_| vec![0u8; CHUNK]))
        .chain(std::iter::once(vec![0u8; 1024]));
    let body = reqwest::Body::wrap_stream(futures_util::stream::iter(
        parts.map(Ok::<_, std::io::Error>),
    ));

    let pid = cluster.controller.pid();
    let before = peak_rss(pid);
    let started = std::time::Instant::now();
    let res = cluster
        .request(Method::POST, "/courses/bigdata/data", &teacher)
        .query(&[("name", "big")])
        .timeout(Duration::from_secs(240))
        .body(body)
        .send()
        .await
        .expect("controller answers");
    let status = res.status().as_u16();
    let answer: Value = res.json().await.unwrap_or(Value::Null);
    let grew = peak_rss(pid).saturating_sub(before);
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["dataset"]["sha256"], sent.as_str(), "{answer}");
    assert_eq!(answer["dataset"]["size_bytes"], size + 1536, "{answer}");
    assert!(
        grew < 64 << 20,
        "the controller's peak memory grew {} MiB for a 2 GiB push",
        grew >> 20
    );
    let stored = cluster
        .controller_dir()
        .join("data")
        .join(format!("{sent}.tar"));
    assert_eq!(
        std::fs::metadata(&stored).expect("stored").len(),
        size + 1536
    );
    eprintln!(
        "2 GiB push in {:?}, controller peak grew {} MiB",
        started.elapsed(),
        grew >> 20
    );
}
