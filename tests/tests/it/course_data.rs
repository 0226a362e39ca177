//! Issue 45's datasets against real LXD and Incus, PostgreSQL and ssh: a dataset pushed once is
//! read at `/data/NAME` by every student over ssh, read-only (EROFS); a new version reaches the
//! running containers without a restart and the old volume goes; bad pushes are refused with the
//! field named and leave nothing behind.

use std::time::Duration;

use cohort_e2e::bodies::{course, instance, limits, to_json, CreateCourse, CreateInstance};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::{TestDaemon, TestLxd};
use cohort_e2e::ssh::SshKey;
use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// A tar holding `files` (path, content), and `links` (path, target) as symbolic links.
fn tarball(files: &[(&str, &[u8])], links: &[(&str, &str)]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, content) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(content.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        // `set_path` refuses `..`; a hostile tar is written byte by byte.
        let name = h.as_old_mut().name.as_mut();
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        tar.append(&h, *content).expect("append");
    }
    for (path, target) in links {
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o777);
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_path(path).expect("path");
        h.set_link_name(target).expect("link");
        h.set_cksum();
        tar.append(&h, std::io::empty()).expect("append");
    }
    tar.into_inner().expect("tar")
}

async fn push(
    cluster: &Cluster,
    token: &str,
    code: &str,
    name: &str,
    body: Vec<u8>,
) -> (u16, Value) {
    let res = cluster
        .request(Method::POST, &format!("/courses/{code}/data"), token)
        .query(&[("name", name)])
        .body(body)
        .send()
        .await
        .expect("controller answers");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn data_files(cluster: &Cluster) -> Vec<String> {
    std::fs::read_dir(cluster.controller_dir().join("data"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pushes_are_refused_naming_the_field_and_leave_nothing() {
    let cluster = Cluster::start(0).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-badpush", "instructor").await;
    cluster
        .create_course(&teacher, course("badpush", "Bad pushes", "cohort/base"))
        .await;
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("escape", tarball(&[("../outside", b"x")], &[]), "body"),
        ("absolute", tarball(&[("/etc/passwd", b"x")], &[]), "body"),
        (
            "link",
            tarball(&[("a", b"x")], &[("sub/l", "../../etc")]),
            "body",
        ),
        (
            "abslink",
            tarball(&[("a", b"x")], &[("l", "/etc/shadow")]),
            "body",
        ),
        ("a/b", tarball(&[("a", b"x")], &[]), "name"),
        (
            "notatar",
            b"just some bytes that are not a tar archive".repeat(20),
            "body",
        ),
    ];
    for (name, body, field) in cases {
        let (status, answer) = push(&cluster, &teacher, "badpush", name, body).await;
        assert_eq!(status, 400, "{name}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{name}: {answer}");
    }
    // Past the quota: refused while it streams.
    cluster
        .admin(
            Method::PUT,
            "/courses/badpush/data-quota",
            Some(json!({"quota_mib": 1})),
        )
        .await;
    let big = vec![7u8; 3 << 20];
    let (status, answer) = push(
        &cluster,
        &teacher,
        "badpush",
        "big",
        tarball(&[("big.bin", &big)], &[]),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["field"], "quota", "{answer}");
    // A student may not push.
    cluster.user("stu-badpush", "student").await;
    let student = cluster.token_for("stu-badpush").await;
    let (status, _) = push(
        &cluster,
        &student,
        "badpush",
        "ok",
        tarball(&[("a", b"x")], &[]),
    )
    .await;
    assert_eq!(status, 403);

    let usage: Value = cluster
        .request(Method::GET, "/courses/badpush/data", &teacher)
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(usage["datasets"], json!([]), "{usage}");
    assert_eq!(
        data_files(&cluster),
        Vec::<String>::new(),
        "nothing half-made"
    );
}

/// Runs `cmd` as `user` in their container; its output and whether it succeeded.
fn ssh(key: &SshKey, port: u16, user: &str, cmd: &str) -> (bool, String) {
    let out = key.run_when_up("127.0.0.1", port, user, cmd, Duration::from_secs(90));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn students_on_lxd_and_incus_read_a_dataset_and_its_new_version() {
    let mut cluster = Cluster::start(0).await;
    let on_lxd = TestLxd::on(TestDaemon::Lxd);
    let on_incus = TestLxd::on(TestDaemon::Incus);
    let (lxd_project, incus_project) =
        (on_lxd.project().to_string(), on_incus.project().to_string());
    cluster.add_node_in("on-lxd", on_lxd).await;
    cluster.add_node_in("on-incus", on_incus).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-data", "instructor").await;
    cluster
        .create_course(
            &teacher,
            CreateCourse {
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course("data1", "Data", "cohort/base")
            },
        )
        .await;
    let key = SshKey::generate();
    let roster: String = ["ana", "ben", "cy", "dee"]
        .iter()
        .map(|u| format!("{u},{u},,{}\n", key.public_key()))
        .collect();
    cluster
        .import_roster(
            &teacher,
            "data1",
            format!("username,name,email,ssh_key\n{roster}"),
        )
        .await;
    cluster.provision("data1", &teacher).await;
    let students: Vec<Value> = cluster
        .request(Method::GET, "/courses/data1/students", &teacher)
        .send()
        .await
        .expect("students")
        .json()
        .await
        .expect("json");
    let logins: Vec<(String, u16, String)> = students
        .iter()
        .map(|s| {
            (
                s["username"].as_str().expect("username").to_string(),
                s["ssh_port"].as_u64().expect("port") as u16,
                s["node"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();

    // The instructor's own container, beside a student (an admin places it there): staff
    // mount the course's data read-write.
    let op = cluster
        .admin(
            Method::POST,
            "/instances",
            Some(to_json(&CreateInstance {
                limits: Some(limits(1, 256, 2)),
                owner: Some("prof-data".into()),
                node: Some(logins[0].2.clone()),
                ..instance("prof-box", "cohort/base")
            })),
        )
        .await;
    let done = cluster
        .wait_operation(op["id"].as_str().expect("id"), Duration::from_secs(300))
        .await;
    assert_eq!(done["status"], "success", "{done}");
    let prof_box: Value = cluster
        .request(Method::GET, "/instances/prof-box", &teacher)
        .send()
        .await
        .expect("instance")
        .json()
        .await
        .expect("json");
    let (prof_daemon, prof_project) = match prof_box["node"].as_str() {
        Some("on-lxd") => (TestDaemon::Lxd, lxd_project.clone()),
        _ => (TestDaemon::Incus, incus_project.clone()),
    };
    let in_prof_box = |cmd: &str| {
        prof_daemon.output(&[
            "exec",
            "--project",
            &prof_project,
            "prof-box",
            "--",
            "sh",
            "-c",
            cmd,
        ])
    };

    let wait_pushed = |answer: Value| {
        let cluster = &cluster;
        async move {
            let id = answer["operation"]["id"]
                .as_str()
                .expect("an operation")
                .to_string();
            let done = cluster.wait_operation(&id, Duration::from_secs(300)).await;
            assert_eq!(
                done["status"],
                "success",
                "{done}\n{}",
                cluster.controller_log()
            );
            answer["dataset"]["sha256"]
                .as_str()
                .expect("sha")
                .to_string()
        }
    };
    let v1 = tarball(
        &[("hello.txt", b"version one\n"), ("sub/deep.txt", b"deep\n")],
        &[("sub/up", "../hello.txt")],
    );
    let v1_sha = hex::encode(Sha256::digest(&v1));
    let (status, answer) = push(&cluster, &teacher, "data1", "corpus", v1).await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        wait_pushed(answer).await,
        v1_sha,
        "the hash of what was sent"
    );

    for (user, port, _) in &logins {
        let (ok, out) = ssh(
            &key,
            *port,
            user,
            "cat /data/corpus/hello.txt /data/corpus/sub/up",
        );
        assert!(ok, "{user}: {out}");
        assert_eq!(out, "version one\nversion one\n", "{user}");
        let (ok, out) = ssh(&key, *port, user, "touch /data/corpus/mine");
        assert!(
            !ok && out.contains("Read-only file system"),
            "{user} wrote: {out}"
        );
    }

    // Staff write; the students on the same node read what they wrote (each node holds its
    // own copy: a change for every node is a new version pushed).
    let wrote = in_prof_box("echo from staff > /data/corpus/staff.txt");
    assert!(
        wrote.status.success(),
        "the instructor's container cannot write: {}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let beside: Vec<_> = logins
        .iter()
        .filter(|(_, _, node)| Some(node.as_str()) == prof_box["node"].as_str())
        .collect();
    assert!(
        !beside.is_empty(),
        "no student beside the instructor's container: {logins:?}"
    );
    for (user, port, _) in beside {
        let (ok, out) = ssh(&key, *port, user, "cat /data/corpus/staff.txt");
        assert!(ok && out == "from staff\n", "{user}: {out}");
    }

    // A new version reaches the running containers (no restart) and the old volume goes.
    let v2 = tarball(&[("hello.txt", b"version two\n")], &[]);
    let v2_sha = hex::encode(Sha256::digest(&v2));
    let (status, answer) = push(&cluster, &teacher, "data1", "corpus", v2).await;
    assert_eq!(status, 201, "{answer}");
    wait_pushed(answer).await;
    for (user, port, _) in &logins {
        let (ok, out) = ssh(&key, *port, user, "cat /data/corpus/hello.txt");
        assert!(ok, "{user}: {out}");
        assert!(out.starts_with("version two\n"), "{user}: {out}");
    }
    let read = in_prof_box("cat /data/corpus/hello.txt");
    assert_eq!(String::from_utf8_lossy(&read.stdout), "version two\n");
    let volumes = |daemon: TestDaemon, project: &str| {
        let out = daemon.run(&[
            "storage",
            "volume",
            "list",
            "cohort",
            "--project",
            project,
            "--format",
            "csv",
            "-c",
            "n",
        ]);
        out.lines()
            .filter(|l| l.starts_with("dataset-"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let mut nodes_used: Vec<&str> = logins.iter().map(|(_, _, n)| n.as_str()).collect();
    nodes_used.extend(prof_box["node"].as_str());
    for (node, daemon, project) in [
        ("on-lxd", TestDaemon::Lxd, &lxd_project),
        ("on-incus", TestDaemon::Incus, &incus_project),
    ] {
        if !nodes_used.contains(&node) {
            continue;
        }
        assert_eq!(
            volumes(daemon, project),
            vec![format!("dataset-{}", &v2_sha[..48])],
            "{node}: exactly the new version, once (v1 was {})",
            &v1_sha[..48]
        );
    }
    assert_eq!(
        data_files(&cluster),
        vec![format!("{v2_sha}.tar")],
        "the store keeps one copy"
    );
}

/// Placement asks for room for the course's datasets too: a node whose disk holds a student's
/// root and home but not the course's data is not chosen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_room_for_the_courses_data_is_not_chosen() {
    use cohort_controller::courses::{course as courses, enrol, provision};
    use cohort_controller::db::models::course::Course;
    use cohort_controller::db::models::course_dataset::{CourseDataset, NewCourseDataset};
    use cohort_controller::db::schema::{instances as inst, nodes};
    use cohort_e2e::controller::TestController;
    use diesel::prelude::*;

    const GIB: i64 = 1 << 30;
    let t = TestController::new();
    let (admin, _) = t.user("admin", "admin");
    t.image("base");
    let small = t.node("node-small", (25600, 25609), 8, 16, false);
    let big = t.node("node-big", (25610, 25619), 8, 16, false);
    for (node, gib) in [(&small, 6), (&big, 16)] {
        diesel::update(nodes::table.find(node.id))
            .set(nodes::disk_total_bytes.eq(gib * GIB))
            .execute(&mut t.conn())
            .unwrap();
    }
    let course = CreateCourse {
        memory_mib: Some(256),
        disk_gib: Some(2),
        home_mib: Some(1024),
        ..course("droom", "Room", "base")
    };
    courses::create(&t.ctl, admin.clone(), course)
        .await
        .unwrap();
    // An 8 GiB dataset, as its push leaves it.
    let mut conn = t.conn();
    let id = Course::by_code(&mut conn, "droom").unwrap().unwrap().id;
    CourseDataset::put(
        &mut conn,
        &NewCourseDataset {
            course_id: id,
            name: "corpus",
            sha256: &"a".repeat(64),
            size_bytes: 8 * GIB,
            pushed_by: None,
        },
    )
    .unwrap();
    let roster = b"username,name,email,ssh_key\nr1,,,\nr2,,,\n".to_vec();
    enrol::import(&t.ctl, admin.clone(), "droom".into(), roster)
        .await
        .unwrap();
    provision::provision(&t.ctl, admin, "droom".into())
        .await
        .unwrap();
    for name in ["droom-r1", "droom-r2"] {
        let node: Option<i64> = inst::table
            .filter(inst::name.eq(name))
            .select(inst::node_id)
            .first(&mut t.conn())
            .unwrap();
        assert_eq!(
            node,
            Some(big.id),
            "{name}: 2 GiB root + 1 GiB home + 8 GiB of data fit only the 16 GiB node"
        );
    }
}
