//! Issue 45's archives at a term's end, against real LXD and Incus, PostgreSQL, ssh and
//! Chromium: files written into two students' homes over ssh (one on each daemon) come back
//! from `course archive` byte for byte (every file hashed, in the home and in the archive); the
//! student finds the link on their portal page and what the page fetches hashes to the recorded
//! SHA-256; another student's archive is 403, bad input 4xx; the class downloads as one tar; an
//! expired archive is swept (file and row), audited.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::{TestDaemon, TestLxd};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::PortRange;
use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const COURSE: &str = "arch1";

async fn call(
    cluster: &Cluster,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = cluster.request(method, path, token);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.expect("controller answers");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn get_bytes(cluster: &Cluster, path: &str, token: &str) -> (u16, Option<String>, Vec<u8>) {
    let res = cluster
        .request(Method::GET, path, token)
        .send()
        .await
        .expect("controller answers");
    let status = res.status().as_u16();
    let said = res
        .headers()
        .get("x-cohort-sha256")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, said, res.bytes().await.expect("body").to_vec())
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Each regular file of a `.tar.gz` (path → SHA-256), and each symbolic link (path → target).
fn archive_contents(gz: &[u8]) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(gz));
    let (mut files, mut links) = (BTreeMap::new(), BTreeMap::new());
    for entry in tar.entries().expect("a tar.gz") {
        let mut entry = entry.expect("an entry");
        let path = entry.path().expect("path").display().to_string();
        assert!(!path.starts_with('/') && !path.contains(".."), "{path}");
        match entry.header().entry_type() {
            tar::EntryType::Regular => {
                let mut data = Vec::new();
                entry.read_to_end(&mut data).expect("file data");
                files.insert(path, sha(&data));
            }
            tar::EntryType::Symlink => {
                let target = entry.link_name().expect("link").expect("target");
                links.insert(path, target.display().to_string());
            }
            _ => {}
        }
    }
    (files, links)
}

/// The home's regular files (path → SHA-256), read as root inside the container.
fn home_contents(
    daemon: TestDaemon,
    project: &str,
    instance: &str,
    user: &str,
) -> BTreeMap<String, String> {
    let cmd = format!("cd /home/{user} && find . -type f -exec sha256sum {{}} +");
    let out = daemon.output(&[
        "exec",
        "--project",
        project,
        instance,
        "--",
        "sh",
        "-c",
        &cmd,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let (hash, path) = line.split_once("  ").expect("sha256sum's line");
            (path.trim_start_matches("./").to_string(), hash.to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn homes_on_lxd_and_incus_archive_byte_for_byte_download_and_expire() {
    let mut cluster = Cluster::start_with_env(0, &[("COHORT_ARCHIVE_SWEEP_S", "1")]).await;
    let on_lxd = TestLxd::on(TestDaemon::Lxd);
    let on_incus = TestLxd::on(TestDaemon::Incus);
    let projects = [
        ("on-lxd", TestDaemon::Lxd, on_lxd.project().to_string()),
        (
            "on-incus",
            TestDaemon::Incus,
            on_incus.project().to_string(),
        ),
    ];
    cluster.add_node_in("on-lxd", on_lxd).await;
    cluster.add_node_in("on-incus", on_incus).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-arch", "instructor").await;
    cluster
        .create_course(
            &teacher,
            CreateCourse {
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course(COURSE, "Archives", "cohort/base")
            },
        )
        .await;
    cluster.user("outsider-arch", "student").await;

    // One student a node: each placed, then their node cordoned.
    let key = SshKey::generate();
    let mut placed = Vec::new();
    for user in ["ana", "ben"] {
        cluster
            .import_roster(
                &teacher,
                COURSE,
                format!(
                    "username,name,email,ssh_key\n{user},{user},,{}\n",
                    key.public_key()
                ),
            )
            .await;
        cluster.provision(COURSE, &teacher).await;
        let (_, students) = call(
            &cluster,
            Method::GET,
            &format!("/courses/{COURSE}/students"),
            &teacher,
            None,
        )
        .await;
        let s = students
            .as_array()
            .expect("students")
            .iter()
            .find(|s| s["username"] == user)
            .unwrap_or_else(|| panic!("{user}: {students}"))
            .clone();
        let node = s["node"].as_str().expect("node").to_string();
        cluster
            .admin(Method::POST, &format!("/nodes/{node}/cordon"), None)
            .await;
        placed.push((
            user,
            node,
            s["instance"].as_str().expect("instance").to_string(),
            s["ssh_port"].as_u64().expect("port") as u16,
        ));
    }
    let mut nodes: Vec<&str> = placed.iter().map(|p| p.1.as_str()).collect();
    nodes.sort();
    assert_eq!(
        nodes,
        ["on-incus", "on-lxd"],
        "one student a daemon: {placed:?}"
    );

    // Work written over ssh: text, a binary blob, a name with a space, a link, a dotfile.
    for (user, _, _, port) in &placed {
        let cmd = format!(
            "mkdir -p work/sub && printf '{user} notes\\n' > work/a.txt && \
             head -c 300000 /dev/urandom > work/sub/blob.bin && printf x > 'work/with space.txt' && \
             ln -s a.txt work/link && printf 'set -o vi\\n' >> .bashrc"
        );
        let out = key.run_when_up("127.0.0.1", *port, user, &cmd, Duration::from_secs(90));
        assert!(
            out.status.success(),
            "{user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Bad input first: nothing is enqueued.
    let ana = cluster.token_for("ana").await;
    let (status, answer) = call(
        &cluster,
        Method::POST,
        "/courses/nope/archive",
        &teacher,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = call(
        &cluster,
        Method::POST,
        &format!("/courses/{COURSE}/archive"),
        &teacher,
        Some(json!({"days": 0})),
    )
    .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("days")),
        "{answer}"
    );
    let (status, answer) = call(
        &cluster,
        Method::POST,
        &format!("/courses/{COURSE}/archive"),
        &ana,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 403, "{answer}");

    let started = Instant::now();
    let (status, op) = call(
        &cluster,
        Method::POST,
        &format!("/courses/{COURSE}/archive"),
        &teacher,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 202, "{op}");
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(300))
        .await;
    assert_eq!(
        done["status"],
        "success",
        "{done}\n{}",
        cluster.controller_log()
    );
    eprintln!("archived two homes in {:?}", started.elapsed());

    let (status, rows) = call(
        &cluster,
        Method::GET,
        &format!("/courses/{COURSE}/archive"),
        &teacher,
        None,
    )
    .await;
    assert_eq!(status, 200, "{rows}");
    let rows = rows.as_array().expect("archives").clone();
    assert_eq!(rows.len(), 2, "{rows:?}");
    let store = cluster.controller_dir().join("archives").join(COURSE);
    for (user, node, instance, _) in &placed {
        let row = rows.iter().find(|r| r["user"] == *user).expect("a row");
        let (status, said, gz) = get_bytes(
            &cluster,
            &format!("/courses/{COURSE}/archive/{user}"),
            &teacher,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(
            sha(&gz),
            row["sha256"],
            "{user}: the bytes hash as recorded"
        );
        assert_eq!(said.as_deref(), row["sha256"].as_str());
        assert_eq!(gz.len() as u64, row["size_bytes"].as_u64().expect("size"));
        let on_disk = std::fs::read(store.join(format!("{user}.tar.gz"))).expect("the stored file");
        assert_eq!(sha(&on_disk), row["sha256"]);
        let (daemon, project) = projects
            .iter()
            .find(|p| p.0 == node)
            .map(|p| (p.1, p.2.clone()))
            .expect("daemon");
        let home = home_contents(daemon, &project, instance, user);
        let (files, links) = archive_contents(&gz);
        assert!(
            home.contains_key("work/sub/blob.bin") && home.contains_key(".bashrc"),
            "{home:?}"
        );
        assert_eq!(
            files, home,
            "{user} on {node}: the archive's files are the home's"
        );
        assert_eq!(
            links.get("work/link").map(String::as_str),
            Some("a.txt"),
            "{links:?}"
        );
    }

    // Who may read what: another student's is 403; unknown course, a user not in the course
    // and an unknown user 404.
    let (status, _, _) = get_bytes(&cluster, &format!("/courses/{COURSE}/archive/ben"), &ana).await;
    assert_eq!(status, 403);
    let (status, _, _) = get_bytes(&cluster, &format!("/courses/{COURSE}/archive.tar"), &ana).await;
    assert_eq!(status, 403);
    let (status, _, _) = get_bytes(&cluster, "/courses/nope/archive/ana", &ana).await;
    assert_eq!(status, 404);
    for who in ["outsider-arch", "nobody-at-all"] {
        let (status, _, _) = get_bytes(
            &cluster,
            &format!("/courses/{COURSE}/archive/{who}"),
            &teacher,
        )
        .await;
        assert_eq!(status, 404, "{who}");
    }
    let (status, _, own) =
        get_bytes(&cluster, &format!("/courses/{COURSE}/archive/ana"), &ana).await;
    assert_eq!(status, 200);

    // The class as one tar: each student's .tar.gz, as recorded.
    let (status, _, class) = get_bytes(
        &cluster,
        &format!("/courses/{COURSE}/archive.tar"),
        &teacher,
    )
    .await;
    assert_eq!(status, 200);
    let mut members = BTreeMap::new();
    let mut tar = tar::Archive::new(&class[..]);
    for entry in tar.entries().expect("a tar") {
        let mut entry = entry.expect("entry");
        let path = entry.path().expect("path").display().to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("data");
        members.insert(path, sha(&data));
    }
    let expected: BTreeMap<String, String> = rows
        .iter()
        .map(|r| {
            (
                format!("{COURSE}/{}.tar.gz", r["user"].as_str().expect("user")),
                r["sha256"].as_str().expect("sha").to_string(),
            )
        })
        .collect();
    assert_eq!(members, expected);

    // Ana's portal page links her archive; what the page fetches hashes as recorded.
    let ana_row = rows
        .iter()
        .find(|r| r["user"] == "ana")
        .expect("ana's row")
        .clone();
    assert_eq!(sha(&own), ana_row["sha256"]);
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "ana",
        "ana-archive-pw",
    );
    let base = cluster.controller.url();
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    browser.sign_in(&base, "ana", "ana-archive-pw").await;
    browser.goto(&format!("{base}/")).await;
    assert_eq!(
        browser.count("a.archive-link").await,
        1,
        "one link on ana's page"
    );
    let fetched = browser
        .run_async(
            "const done = arguments[0];
             const a = document.querySelector('a.archive-link');
             fetch(a.href).then(r => r.arrayBuffer())
               .then(b => crypto.subtle.digest('SHA-256', b))
               .then(h => done([a.getAttribute('href'), Array.from(new Uint8Array(h))
                   .map(x => x.toString(16).padStart(2, '0')).join('')]))
               .catch(e => done(String(e)));",
        )
        .await;
    assert_eq!(
        fetched[0],
        format!("/courses/{COURSE}/archive/ana"),
        "{fetched}"
    );
    assert_eq!(fetched[1], ana_row["sha256"], "{fetched}");
    let other = browser
        .run_async(&format!(
            "const done = arguments[0];
             fetch('/courses/{COURSE}/archive/ben').then(r => done(r.status)).catch(e => done(String(e)));"
        ))
        .await;
    assert_eq!(other, 403, "ben's archive from ana's page");
    drop(browser);

    // Expiry: ana's archive made due; the sweep deletes its file and row, audited.
    {
        use diesel::prelude::*;
        let mut conn = diesel::PgConnection::establish(&cluster.db_url).expect("database");
        diesel::sql_query(
            "UPDATE course_archives SET expires_at = now() - interval '1 minute' \
             WHERE user_id = (SELECT id FROM users WHERE username = 'ana')",
        )
        .execute(&mut conn)
        .expect("expire ana's archive");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, rows) = call(
            &cluster,
            Method::GET,
            &format!("/courses/{COURSE}/archive"),
            &teacher,
            None,
        )
        .await;
        let users: Vec<&str> = rows
            .as_array()
            .expect("rows")
            .iter()
            .filter_map(|r| r["user"].as_str())
            .collect();
        if users == ["ben"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not swept: {rows}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        !store.join("ana.tar.gz").exists(),
        "the expired file is gone"
    );
    assert!(
        store.join("ben.tar.gz").exists(),
        "the other archive is kept"
    );
    let (status, _, _) = get_bytes(&cluster, &format!("/courses/{COURSE}/archive/ana"), &ana).await;
    assert_eq!(status, 404);
    let audit = cluster
        .admin(Method::GET, "/audit?action=archive_expired", None)
        .await;
    let text = audit.to_string();
    assert!(
        text.contains("archive_expired") && text.contains("ana"),
        "{audit}"
    );
}
