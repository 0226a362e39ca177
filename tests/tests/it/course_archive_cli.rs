//! Issue 45's archives driven through the real `cohort` binary, against a controller, real LXD
//! containers, PostgreSQL and ssh: a course's own `archive_days` (`course create|set
//! --archive-days`, shown by `course show`, carried by `course copy`, bad values an `Error:`
//! line and a 400 naming `archive_days`) is what its archives expire by, and the sweep deletes
//! an archive once its course's days are up, audited; `course archive`, `--list` and
//! `--download` (the staff's whole class, a student's own; another's refused), each file's
//! SHA-256 matching the recorded one and its files the home's; `course teardown --delete
//! --archive` deletes a home only once its archive exists: a student whose archive cannot be
//! written keeps their home, the other's home goes with its archive made from it.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestLxd;
use reqwest::Method;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::cli_support::Cli;

const COURSE: &str = "arcli1";

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Each regular file of a `.tar.gz`: path → SHA-256.
fn archive_files(gz: &[u8]) -> BTreeMap<String, String> {
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(gz));
    let mut files = BTreeMap::new();
    for entry in tar.entries().expect("a tar.gz") {
        let mut entry = entry.expect("an entry");
        if entry.header().entry_type() == tar::EntryType::Regular {
            let path = entry.path().expect("path").display().to_string();
            let mut data = Vec::new();
            entry.read_to_end(&mut data).expect("file data");
            files.insert(path, sha(&data));
        }
    }
    files
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The course's archives as `course archive --list -f json` prints them, by user.
fn listed(cli: &Cli) -> BTreeMap<String, Value> {
    let out = cli.ok(&["course", "archive", COURSE, "--list", "-f", "json"]);
    let rows: Vec<Value> = serde_json::from_str(&out).expect("json list");
    rows.into_iter()
        .map(|r| (r["user"].as_str().expect("user").to_string(), r))
        .collect()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().expect("a time").parse().expect("RFC 3339")
}

fn sql(cluster: &Cluster, statement: &str) {
    use diesel::prelude::*;
    let mut conn = diesel::PgConnection::establish(&cluster.db_url).expect("database");
    diesel::sql_query(statement)
        .execute(&mut conn)
        .expect(statement);
}

/// A course container's home volume, as the controller names it (`home-<instance>`, at most
/// 63 characters).
fn home_volume(instance: &str) -> String {
    let name: String = format!("home-{instance}").chars().take(63).collect();
    name.trim_end_matches('-').to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn archive_days_archive_verbs_and_teardown_through_the_cli() {
    let mut cluster = Cluster::start_with_env(0, &[("COHORT_ARCHIVE_SWEEP_S", "1")]).await;
    cluster
        .add_node_in("node1", TestLxd::on(TestDaemon::Lxd))
        .await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof-arcli", "instructor").await;
    let cli = Cli::of_cluster(&cluster, &teacher);
    let create = |days: &str| -> Vec<String> {
        [
            "course",
            "create",
            COURSE,
            "--title",
            "Archives by CLI",
            "--image",
            "cohort/base",
            "--memory",
            "256MiB",
            "--disk",
            "2GiB",
            "--archive-days",
            days,
        ]
        .map(String::from)
        .to_vec()
    };

    // Bad days: an `Error:` line naming the field, nothing made; the API's 400 names it too.
    for bad in ["0", "3651"] {
        cli.fails(&args(&create(bad)), "archive_days");
    }
    assert_eq!(cli.ok(&["course", "list", "-f", "csv"]), "");
    cli.ok(&args(&create("1")));
    let shown = cli.ok(&["course", "show", COURSE]);
    assert!(shown.contains("archive_days: 1\n"), "{shown}");
    cli.fails(
        &["course", "set", COURSE, "--archive-days", "0"],
        "archive_days",
    );
    for body in [json!({"archive_days": 4000}), json!({"archive_days": -1})] {
        let res = cluster
            .request(
                Method::PUT,
                &format!("/courses/{COURSE}/archive-days"),
                &teacher,
            )
            .json(&body)
            .send()
            .await
            .expect("controller answers");
        let status = res.status().as_u16();
        let answer: Value = res.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (status, answer["error"]["field"].as_str()),
            (400, Some("archive_days")),
            "{body}: {answer}"
        );
    }
    cli.ok(&["course", "set", COURSE, "--archive-days", "2"]);
    let shown = cli.ok(&["course", "show", COURSE]);
    assert!(shown.contains("archive_days: 2\n"), "{shown}");
    let audit = cluster
        .admin(Method::GET, "/audit?action=set_archive_days", None)
        .await;
    assert!(audit.to_string().contains(COURSE), "{audit}");
    // Next term's course keeps the setting.
    cli.ok(&["course", "copy", COURSE, "arcli2"]);
    let copied = cli.ok(&["course", "show", "arcli2"]);
    assert!(copied.contains("archive_days: 2\n"), "{copied}");

    // Two students, work written over ssh.
    let key = SshKey::generate();
    let roster = tempfile::NamedTempFile::new().expect("roster");
    std::fs::write(
        roster.path(),
        format!(
            "username,name,email,ssh_key\nana,Ana,,{k}\nben,Ben,,{k}\n",
            k = key.public_key()
        ),
    )
    .expect("write roster");
    cli.ok(&[
        "course",
        "roster",
        COURSE,
        roster.path().to_str().expect("path"),
    ]);
    cli.ok(&["-q", "course", "provision", COURSE, "--wait"]);
    let students: Value = cluster
        .call(
            &teacher,
            Method::GET,
            &format!("/courses/{COURSE}/students"),
            None,
        )
        .await;
    let mut placed = BTreeMap::new();
    for s in students.as_array().expect("students") {
        let user = s["username"].as_str().expect("user").to_string();
        let port = s["ssh_port"].as_u64().expect("port") as u16;
        let instance = s["instance"].as_str().expect("instance").to_string();
        let cmd = format!(
            "mkdir -p work && printf '{user} notes\\n' > work/a.txt && \
             head -c 200000 /dev/urandom > work/blob.bin"
        );
        let out = key.run_when_up("127.0.0.1", port, &user, &cmd, Duration::from_secs(90));
        assert!(
            out.status.success(),
            "{user}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hashes = cluster.nodes[0].lxd.lxc(&[
            "exec",
            &instance,
            "--",
            "sh",
            "-c",
            &format!("cd /home/{user} && sha256sum work/a.txt work/blob.bin"),
        ]);
        let files: BTreeMap<String, String> = hashes
            .lines()
            .map(|l| {
                let (h, p) = l.split_once("  ").expect("sha256sum line");
                (p.to_string(), h.to_string())
            })
            .collect();
        placed.insert(user, (instance, files));
    }
    assert_eq!(placed.len(), 2, "{students}");

    // `course archive` with no --days: the course's 2 days.
    cli.ok(&["-q", "course", "archive", COURSE]);
    let rows = listed(&cli);
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["ana", "ben"], "{rows:?}");
    for (user, row) in &rows {
        let kept = time(&row["expires_at"]) - time(&row["created_at"]);
        assert!(
            (kept - chrono::Duration::days(2)).num_seconds().abs() < 60,
            "{user}'s archive is kept {kept:?}, not the course's 2 days"
        );
    }

    // `--download DIR`: every student's, each hash-checked and printed; the files the home's.
    let dir = tempfile::tempdir().expect("download dir");
    let out = cli.ok(&[
        "course",
        "archive",
        COURSE,
        "--download",
        dir.path().to_str().expect("dir"),
    ]);
    for (user, (_, files)) in &placed {
        let path = dir.path().join(format!("{user}.tar.gz"));
        let gz = std::fs::read(&path).expect("downloaded archive");
        let recorded = rows[user]["sha256"].as_str().expect("sha256");
        assert_eq!(sha(&gz), recorded, "{user}'s download hashes as recorded");
        assert!(
            out.contains(&format!("{} {recorded}", path.display())),
            "{out}"
        );
        let inside = archive_files(&gz);
        for (file, hash) in files {
            assert_eq!(inside.get(file), Some(hash), "{user}: {file} in {inside:?}");
        }
    }
    // A student downloads their own with `--user`, and not another's.
    let ana_cli = Cli::of_cluster(&cluster, &cluster.token_for("ana").await);
    let own = tempfile::tempdir().expect("ana's dir");
    let own_dir = own.path().to_str().expect("dir");
    ana_cli.ok(&[
        "course",
        "archive",
        COURSE,
        "--download",
        own_dir,
        "--user",
        "ana",
    ]);
    let gz = std::fs::read(own.path().join("ana.tar.gz")).expect("ana's own");
    assert_eq!(sha(&gz), rows["ana"]["sha256"].as_str().expect("sha"));
    ana_cli.fails(
        &[
            "course",
            "archive",
            COURSE,
            "--download",
            own_dir,
            "--user",
            "ben",
        ],
        "ben",
    );
    assert!(!own.path().join("ben.tar.gz").exists());
    ana_cli.fails(&["course", "archive", COURSE, "--list"], COURSE);

    // The sweep goes by the course's days: a day on, both are kept; two days and a minute on,
    // ana's is deleted (file and row), audited, and ben's (a day on) is kept.
    let store = cluster.controller_dir().join("archives").join(COURSE);
    sql(
        &cluster,
        "UPDATE course_archives SET created_at = created_at - interval '1 day', \
         expires_at = expires_at - interval '1 day'",
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(listed(&cli).len(), 2, "nothing is due a day on");
    sql(
        &cluster,
        "UPDATE course_archives SET created_at = created_at - interval '1 day 1 minute', \
         expires_at = expires_at - interval '1 day 1 minute' \
         WHERE user_id = (SELECT id FROM users WHERE username = 'ana')",
    );
    // The sweep deletes the row, then the file: both go, the file a moment after the row.
    let deadline = Instant::now() + Duration::from_secs(60);
    while listed(&cli).contains_key("ana") || store.join("ana.tar.gz").exists() {
        assert!(
            Instant::now() < deadline,
            "ana's archive not swept (row listed: {}, file there: {})\n{}",
            listed(&cli).contains_key("ana"),
            store.join("ana.tar.gz").exists(),
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(store.join("ben.tar.gz").exists(), "ben's is kept");
    let audit = cluster
        .admin(Method::GET, "/audit?action=archive_expired", None)
        .await;
    assert!(audit.to_string().contains("ana"), "{audit}");

    // Teardown --delete --archive: ben's archive cannot be written (a directory holds its
    // place), so his home is kept; ana's is archived anew, then her home goes.
    std::fs::remove_file(store.join("ben.tar.gz")).expect("remove ben's file");
    std::fs::create_dir(store.join("ben.tar.gz")).expect("block ben's archive");
    std::fs::write(store.join("ben.tar.gz").join("keep"), "x").expect("non-empty");
    let out = cli.run(&[
        "-q",
        "course",
        "teardown",
        COURSE,
        "--delete",
        "--archive",
        "--force",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.starts_with("Error: "),
        "ben's archive failed, so the teardown did: {stderr}\n{}",
        cluster.controller_log()
    );
    let rows = listed(&cli);
    let ana = rows.get("ana").expect("ana archived by the teardown");
    let gz = std::fs::read(store.join("ana.tar.gz")).expect("ana's file");
    assert_eq!(sha(&gz), ana["sha256"].as_str().expect("sha"));
    let inside = archive_files(&gz);
    for (file, hash) in &placed["ana"].1 {
        assert_eq!(inside.get(file), Some(hash), "ana: {file} in {inside:?}");
    }
    let has_home = |instance: &str| {
        cluster.nodes[0]
            .lxd
            .lxc_output(&[
                "storage",
                "volume",
                "show",
                "cohort",
                &home_volume(instance),
            ])
            .status
            .success()
    };
    assert!(!has_home(&placed["ana"].0), "ana's home went once archived");
    assert!(
        has_home(&placed["ben"].0),
        "ben's home, not archived, is kept"
    );
}
