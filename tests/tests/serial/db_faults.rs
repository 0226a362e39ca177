//! Issue 42, the database's disk full: a private PostgreSQL cluster whose database lives in a
//! tablespace on a 48 MiB loop-mounted ext4 filesystem, filled up by a file while the controller
//! runs. A roster import (many rows, one transaction) is refused with 503 and words that say
//! why, leaves no student of it behind, and the controller answers other calls; once the space
//! is back the same import completes. Serial: it mounts a filesystem and runs a PostgreSQL of
//! its own.

use std::path::PathBuf;
use std::process::Command;

use cohort_e2e::bodies::{course, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::pg::PrivatePg;
use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use reqwest::Method;
use serde_json::Value;

/// A small ext4 filesystem on a loop device, mounted for PostgreSQL; unmounted on drop.
struct SmallDisk {
    _dir: tempfile::TempDir,
    mount: PathBuf,
}

fn sh(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl SmallDisk {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cohort-small-disk-")
            .tempdir()
            .expect("dir");
        // PostgreSQL (user `postgres`) must reach the mount point.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        let image = dir.path().join("disk.img");
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).expect("mount point");
        let file = std::fs::File::create(&image).expect("image");
        file.set_len(48 << 20).expect("size");
        // No blocks reserved for root: PostgreSQL sees the disk full when the filler does.
        sh(
            "mkfs.ext4",
            &["-q", "-m", "0", image.to_str().expect("path")],
        );
        sh(
            "mount",
            &[
                "-o",
                "loop",
                image.to_str().expect("path"),
                mount.to_str().expect("path"),
            ],
        );
        let ts = mount.join("ts");
        std::fs::create_dir(&ts).expect("tablespace dir");
        sh("chown", &["postgres:postgres", ts.to_str().expect("path")]);
        SmallDisk { _dir: dir, mount }
    }

    fn tablespace(&self) -> PathBuf {
        self.mount.join("ts")
    }

    fn filler(&self) -> PathBuf {
        self.mount.join("filler")
    }

    /// Fills every free block with a file (1 MiB writes, then 4 KiB ones).
    fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::File::create(self.filler()).expect("filler");
        for chunk in [1usize << 20, 4096] {
            let block = vec![0u8; chunk];
            while f.write_all(&block).and_then(|_| f.sync_data()).is_ok() {}
        }
    }

    fn free(&self) {
        std::fs::remove_file(self.filler()).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

fn roster(n: usize) -> String {
    let mut csv = String::from("username,name,email,ssh_key\n");
    for i in 0..n {
        csv.push_str(&format!(
            "full-{i:04},Student {i} of a long enough name,full-{i}@example.org,\n"
        ));
    }
    csv
}

fn students(url: &str) -> i64 {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = PgConnection::establish(url).expect("connect");
    diesel::sql_query("SELECT count(*) AS n FROM users WHERE username LIKE 'full-%'")
        .get_result::<Count>(&mut conn)
        .expect("count")
        .n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_database_disk_refuses_writes_with_words_and_recovers() {
    let _alone = crate::alone().await;
    let disk = SmallDisk::new();
    let pg = PrivatePg::start();
    // The database moves to the small disk before anyone connects to it.
    let admin_url = format!("postgres://cohort@127.0.0.1:{}/postgres", pg.port);
    let mut admin = PgConnection::establish(&admin_url).expect("connect as admin");
    admin
        .batch_execute(&format!(
            "CREATE TABLESPACE small LOCATION '{}'",
            disk.tablespace().display()
        ))
        .expect("a tablespace on the small disk");
    admin
        .batch_execute("ALTER DATABASE cohort SET TABLESPACE small")
        .expect("the database on the small disk");
    let cluster = Cluster::start_with_database(0, &pg.url()).await;
    cluster.import_base_image("cohort/base").await;
    let teacher = cluster.user("prof", "instructor").await;
    cluster
        .create_course(
            &teacher,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course("full101", "Full disks", "cohort/base")
            },
        )
        .await;

    disk.fill();
    let import = |csv: String| {
        cluster
            .request(Method::POST, "/courses/full101/roster", &teacher)
            .header("content-type", "text/csv")
            .body(csv)
            .send()
    };
    let res = import(roster(400)).await.expect("answer");
    let status = res.status();
    let body: Value = res.json().await.unwrap_or_default();
    assert_eq!(
        status, 503,
        "a full disk is the database unavailable: {body}"
    );
    assert_eq!(body["error"]["code"], "database_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("out of disk space"), "{message}");
    assert_eq!(students(&pg.url()), 0, "half a roster was imported");
    // The controller still answers what needs no new space.
    let course = cluster.admin(Method::GET, "/courses/full101", None).await;
    assert_eq!(course["code"], "full101", "{course}");

    disk.free();
    let res = import(roster(400)).await.expect("answer");
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    assert_eq!(
        status, 200,
        "once the space is back the import completes: {text}"
    );
    assert_eq!(students(&pg.url()), 400);
}
