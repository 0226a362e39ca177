//! Issue 27's "the course's limits and network policy" in a real browser (headless Chromium over
//! WebDriver) against a real controller and agent on real LXD, with one course of one student
//! whose container runs: the instructor changes the cores, memory and disk from the course
//! page, the API shows them, and the running container has the new cores and memory in LXD's
//! config and the new memory in its cgroup (its root disk keeps its size, and the page says so); 0 cores or text is refused
//! at its field and changes nothing; forms without the CSRF token are refused; another
//! instructor is refused by the API; the network form sets egress none and then an allow-list
//! as the API then shows them, and a bad destination or source is refused at its field.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{self, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::PortRange;
use cohort_proto::api::courses::CourseLimits;
use reqwest::Method;
use serde_json::{json, Value};

async fn course(cluster: &Cluster) -> Value {
    cluster.admin(Method::GET, "/courses/lab1", None).await
}

/// Waits, up to 60 s, for the page's progress section to report the operation's end.
async fn progress_ends(browser: &Browser) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = browser
            .run("return document.getElementById('progress').dataset.status || '';")
            .await;
        let status = status.as_str().unwrap_or_default().to_string();
        if !status.is_empty() && status != "pending" && status != "running" {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the operation did not end: {status}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_instructor_changes_a_courses_limits_and_network_from_its_page() {
    let cluster = Cluster::start(1).await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof", "instructor").await;
    let other = cluster.user("other", "instructor").await;
    let state = cluster.state.path().join("controller");
    set_portal_password(&cluster.db_url, &state, "prof", "prof's long password");
    let res = cluster
        .request(Method::POST, "/courses", &prof)
        .json(&CreateCourse {
            cpu: Some(1),
            memory_mib: Some(256),
            disk_gib: Some(2),
            ..bodies::course("lab1", "Lab", "cohort/base")
        })
        .send()
        .await
        .expect("create course");
    assert_eq!(res.status(), 201);
    let res = cluster
        .request(Method::POST, "/courses/lab1/roster", &prof)
        .header("content-type", "application/json")
        .body(r#"[{"username": "ann"}]"#)
        .send()
        .await
        .expect("roster");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let id = cluster.start_provision("lab1", &prof).await;
    let op = cluster.wait_operation(&id, Duration::from_secs(300)).await;
    assert_eq!(op["status"], "success", "{op}");
    let lxd = &cluster.nodes[0].lxd;
    let lxd_get = |key: &str| {
        lxd.lxc(&["config", "get", "lab1-ann", key])
            .trim()
            .to_string()
    };
    assert_eq!(lxd_get("limits.cpu"), "1");

    let base = cluster.controller.url();
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(1), "en").await;
    browser.sign_in(&base, "prof", "prof's long password").await;
    browser.goto(&format!("{base}/courses/lab1")).await;
    assert_eq!(
        browser
            .run("return document.getElementById('cpu').value")
            .await,
        "1"
    );
    assert_eq!(browser.count("#limits-kept").await, 0);

    // Without the CSRF token: refused, nothing changed.
    let limits = "cpu=2&memory_mib=512&disk_gib=3";
    assert_eq!(
        browser.post_from_page("/courses/lab1/limits", limits).await,
        403
    );
    assert_eq!(
        browser
            .post_from_page("/courses/lab1/network", "egress=none")
            .await,
        403
    );
    let now = course(&cluster).await;
    assert_eq!(
        (now["cpu"].clone(), now["network"]["egress"].clone()),
        (json!(1), json!("open"))
    );

    // 0 cores, and text for memory, with the browser's own checks off: the controller refuses
    // each at its field, and nothing changes.
    browser
        .run("document.getElementById('limits-form').noValidate = true; return 1;")
        .await;
    browser.type_into("#cpu", "0").await;
    browser.follow("#set-limits").await;
    assert_eq!(browser.text("#cpu-error").await, "must be 1 to 256");
    assert_eq!(browser.count("#memory_mib-error").await, 0);
    browser
        .run(
            "const f = document.getElementById('limits-form'); f.noValidate = true;
             const m = document.getElementById('memory_mib'); m.type = 'text'; m.value = 'lots';
             document.getElementById('cpu').value = '2'; return 1;",
        )
        .await;
    browser.follow("#set-limits").await;
    assert_eq!(
        browser.text("#memory_mib-error").await,
        "must be a whole number"
    );
    assert_eq!(browser.count("#cpu-error").await, 0);
    let now = course(&cluster).await;
    assert_eq!(
        (now["cpu"].clone(), now["memory_mib"].clone()),
        (json!(1), json!(256))
    );
    assert_eq!(lxd_get("limits.cpu"), "1");

    // Another instructor cannot change them through the API.
    let res = cluster
        .request(Method::PUT, "/courses/lab1/limits", &other)
        .json(&CourseLimits {
            cpu: Some(2),
            ..Default::default()
        })
        .send()
        .await
        .expect("put limits");
    assert_eq!(res.status(), 403);
    assert_eq!(course(&cluster).await["cpu"], 1);

    // The change: the course has it, and the running container gets the new cores and memory
    // live, in LXD and inside; its root disk keeps its size, which the page says.
    browser.goto(&format!("{base}/courses/lab1")).await;
    for (field, value) in [("#cpu", "2"), ("#memory_mib", "512"), ("#disk_gib", "3")] {
        browser.type_into(field, value).await;
    }
    browser.follow("#set-limits").await;
    assert!(
        browser.url().await.contains("?operation="),
        "{}",
        browser.url().await
    );
    assert_eq!(progress_ends(&browser).await, "success");
    let now = course(&cluster).await;
    assert_eq!(
        (
            now["cpu"].clone(),
            now["memory_mib"].clone(),
            now["disk_gib"].clone()
        ),
        (json!(2), json!(512), json!(3))
    );
    let ann = cluster
        .admin(Method::GET, "/instances/lab1-ann", None)
        .await;
    assert_eq!(
        ann["limits"],
        json!({"cpu": 2, "memory_mib": 512, "disk_gib": 2})
    );
    assert_eq!(ann["observed_state"], "running");
    assert_eq!(lxd_get("limits.cpu"), "2");
    assert_eq!(lxd_get("limits.memory"), "512MiB");
    // The running container's cgroup has them, as the host's kernel holds it (cgroup v1 or v2).
    let cgroup = |v1: &str, v2: &str| {
        let group = format!("lxc.payload.{}_lab1-ann", lxd.project());
        [
            format!("/sys/fs/cgroup/{v1}"),
            format!("/sys/fs/cgroup/{v2}"),
        ]
        .iter()
        .find_map(|path| std::fs::read_to_string(path.replace("GROUP", &group)).ok())
        .unwrap_or_default()
        .trim()
        .to_string()
    };
    let memory = cgroup("memory/GROUP/memory.limit_in_bytes", "GROUP/memory.max");
    assert_eq!(
        memory,
        (512u64 << 20).to_string(),
        "the running container's memory limit"
    );
    // Not its CPU set: LXD applies `limits.cpu` to a running container through its CPU balancer,
    // which runs apart from the change and skips a round when loading every container of the
    // host fails (as it can while other tests delete theirs), so when it lands is LXD's.
    browser.goto(&format!("{base}/courses/lab1")).await;
    let row = "#limits-kept tr[data-instance=lab1-ann]";
    assert_eq!(browser.text(&format!("{row} td.disk")).await, "2");
    assert!(browser
        .text(&format!("{row} td.reason"))
        .await
        .contains("root disk"));
    browser
        .run("document.getElementById('limits-form').scrollIntoView(); return 1;")
        .await;
    browser.screenshot("course-limits-changed-en").await;

    // The network policy: none, then an allow-list and SSH sources, as the API shows them.
    browser.click("#egress-none").await;
    browser.follow("#set-network").await;
    assert_eq!(course(&cluster).await["network"]["egress"], "none");
    assert!(browser.text("#network-egress").await.starts_with("None"));
    browser.click("#egress-allow").await;
    browser
        .type_into("#allow", "10.0.0.0/8:3128\n192.0.2.1")
        .await;
    browser.type_into("#ssh_from", "192.0.2.0/24").await;
    browser.follow("#set-network").await;
    let network = course(&cluster).await["network"].clone();
    assert_eq!(
        network,
        json!({"egress": {"allow": ["10.0.0.0/8:3128", "192.0.2.1"]}, "ssh_from": ["192.0.2.0/24"]})
    );
    // A bad destination, then a bad source: refused at the field, nothing changed.
    browser.type_into("#allow", "10.0.0.0/8\nnot-a-host").await;
    browser.follow("#set-network").await;
    assert!(browser
        .text("#allow-error")
        .await
        .starts_with("\"not-a-host\""));
    assert_eq!(browser.count("#ssh_from-error").await, 0);
    browser
        .run("document.getElementById('network-now').scrollIntoView(); return 1;")
        .await;
    browser.screenshot("course-network-refused-en").await;
    browser.type_into("#allow", "10.0.0.0/8").await;
    browser.type_into("#ssh_from", "::/0").await;
    browser.follow("#set-network").await;
    assert!(browser
        .text("#ssh_from-error")
        .await
        .starts_with("\"::/0\""));
    assert_eq!(course(&cluster).await["network"], network);

    // A dataset uploaded from the page (the file streamed as the request's body): a file that is
    // not a tarball is refused beside the file field and stored nowhere; a tarball is listed on
    // the page and by the API with the SHA-256 of the file sent.
    let dir = tempfile::tempdir().expect("dir");
    let not_tar = dir.path().join("notes.txt");
    std::fs::write(&not_tar, vec![b'x'; 4096]).expect("file");
    let tar_path = dir.path().join("corpus.tar");
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_path("hello.txt").expect("path");
    h.set_size(9);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append(&h, &b"uploaded\n"[..]).expect("append");
    let bytes = tar.into_inner().expect("tar");
    std::fs::write(&tar_path, &bytes).expect("tar file");
    let sha = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(&bytes))
    };
    let upload = |file: std::path::PathBuf| {
        let browser = &browser;
        async move {
            browser.type_into("#dataset-name", "corpus").await;
            browser
                .keys("#dataset-file", file.to_str().expect("path"))
                .await;
            browser.click("#dataset-upload-button").await;
        }
    };
    upload(not_tar).await;
    let mut refused = String::new();
    for _ in 0..100 {
        refused = browser
            .run("const e = document.getElementById('dataset-body-error'); return e.hidden ? '' : e.textContent;")
            .await
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !refused.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!refused.is_empty(), "no refusal at the file field");
    let none = cluster.admin(Method::GET, "/courses/lab1/data", None).await;
    assert_eq!(none["datasets"], json!([]), "{none}");
    browser.goto(&format!("{base}/courses/lab1")).await;
    upload(tar_path).await;
    let row = "#datasets tr[data-dataset=corpus]";
    let mut listed = 0;
    for _ in 0..30 {
        listed = browser.count(row).await;
        if listed == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(listed, 1, "the uploaded dataset on the page");
    assert_eq!(
        browser.text(&format!("{row} td:nth-child(3)")).await,
        sha[..12]
    );
    let data = cluster.admin(Method::GET, "/courses/lab1/data", None).await;
    assert_eq!(data["datasets"][0]["sha256"], sha.as_str(), "{data}");
}
