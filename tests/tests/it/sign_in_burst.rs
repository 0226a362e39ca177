//! Issue 42, defect 10: portal sign-ins at 9:00 from a campus NAT. Every student comes from one
//! address (this test's client, 127.0.0.1): one of them typing a wrong password 25 times locks
//! out only their own account, never the others; a flood of bad sign-ins and bad API tokens
//! writes a bounded number of `failed_sign_in` audit rows; and while a burst of sign-ins is
//! hashing, a pool of two connections still answers other requests at once. Issue 49's memory
//! target: the argon2 memory of a burst is given back, not kept resident.

use std::time::{Duration, Instant};

use cohort_e2e::browser::set_portal_password;
use cohort_e2e::cluster::Cluster;
use cohort_e2e::portal::Portal;
use diesel::prelude::*;
use reqwest::Method as M;

const PASSWORD: &str = "a correct horse battery";

/// Users `names` (students) with the portal password [`PASSWORD`].
async fn students(cluster: &Cluster, names: &[&str]) {
    for name in names {
        cluster.user(name, "student").await;
        set_portal_password(&cluster.db_url, &cluster.controller_dir(), name, PASSWORD);
    }
}

fn failed_sign_in_rows(cluster: &Cluster) -> i64 {
    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = PgConnection::establish(&cluster.db_url).expect("connect");
    diesel::sql_query("SELECT count(*) AS n FROM audit_log WHERE action = 'failed_sign_in'")
        .get_result::<Count>(&mut conn)
        .expect("count audit rows")
        .n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_typist_behind_a_nat_locks_out_only_their_own_account() {
    let cluster = Cluster::start(0).await;
    students(&cluster, &["alice", "bob", "mallory"]).await;
    let portal = Portal::of(&cluster);
    // The default limit: 20 failures a minute (per source and account now).
    let mut statuses = Vec::new();
    for _ in 0..25 {
        statuses.push(portal.sign_in("mallory", "not my password").await.status);
    }
    assert_eq!(
        statuses,
        [vec![401; 20], vec![429; 5]].concat(),
        "mallory's own account is throttled after 20 typos"
    );
    for name in ["alice", "bob"] {
        let got = portal.sign_in(name, PASSWORD).await;
        assert_eq!(
            got.status,
            303,
            "{name}, behind the same address, still signs in\n{}",
            cluster.controller_log()
        );
    }
    assert_eq!(
        portal.sign_in("mallory", PASSWORD).await.status,
        429,
        "the typist's own account waits out the minute"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_bad_sign_ins_writes_a_bounded_number_of_audit_rows() {
    // No throttle: every attempt reaches the check and the audit.
    let cluster = Cluster::start_with_env(
        0,
        &[
            ("COHORT_AUTH_FAILURES_PER_MINUTE", "0"),
            ("COHORT_AUDIT_FAILURES_PER_MINUTE", "20"),
        ],
    )
    .await;
    let portal = Portal::of(&cluster);
    let before = failed_sign_in_rows(&cluster);
    let started = Instant::now();
    let tries: Vec<_> = (0..120)
        .map(|i| {
            let portal = portal.clone();
            tokio::spawn(async move {
                let who = ["root", "admin", "alice"][i % 3];
                portal.sign_in(who, "guess").await.status
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tries {
        statuses.push(t.await.expect("sign-in task"));
    }
    assert!(statuses.iter().all(|s| *s == 401), "{statuses:?}");
    for _ in 0..60 {
        let res = cluster
            .request(M::GET, "/instances", "not-a-token")
            .send()
            .await
            .expect("answer");
        assert_eq!(res.status(), 401);
    }
    let rows = failed_sign_in_rows(&cluster) - before;
    // A window of a minute writes 20 rows, one per failure, and one summary of the rest; the
    // flood may span a window's end.
    let windows = started.elapsed().as_secs() / 60 + 2;
    assert!(
        rows >= 20 && rows <= 21 * windows as i64,
        "180 failures in {:?} wrote {rows} failed_sign_in rows",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_ins_hashing_leave_the_pool_to_everyone_else() {
    let cluster = Cluster::start_with_env(0, &[("COHORT_DB_POOL_SIZE", "2")]).await;
    let names: Vec<String> = (0..6).map(|i| format!("s{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    students(&cluster, &refs).await;
    let portal = Portal::of(&cluster);
    let burst: Vec<_> = (0..30)
        .map(|i| {
            let portal = portal.clone();
            let name = names[i % names.len()].clone();
            tokio::spawn(async move { portal.sign_in(&name, PASSWORD).await })
        })
        .collect();
    // While the burst hashes, reads that need a connection are answered promptly.
    let mut slowest = Duration::ZERO;
    for _ in 0..10 {
        let started = Instant::now();
        cluster.admin(M::GET, "/nodes", None).await;
        slowest = slowest.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut signed_in = 0;
    for b in burst {
        if b.await.expect("sign-in task").status == 303 {
            signed_in += 1;
        }
    }
    assert_eq!(signed_in, 30, "every sign-in of the burst succeeds");
    assert!(
        slowest < Duration::from_secs(2),
        "a read waited {slowest:?} behind the sign-ins' hashing"
    );
}

/// A size field of the process's `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
fn status_mib(pid: u32, field: &str) -> u64 {
    cohort_e2e::observe::proc_status_kib(pid, field).expect("the controller's memory") / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_sign_ins_gives_its_argon2_memory_back() {
    // Each sign-in hashes with 19 MiB; at most a core's worth run at once. With glibc's dynamic
    // mmap threshold every hash after the first took its memory from the heap and a controller
    // kept about 15 MiB a sign-in resident (362 MiB after 20, 2 GiB after a few hundred).
    let cluster = Cluster::start(0).await;
    let names = ["ann", "ben", "cat", "dan", "eve"];
    students(&cluster, &names).await;
    let portal = Portal::of(&cluster);
    let pid = cluster.controller.pid();
    assert_eq!(portal.sign_in("ann", PASSWORD).await.status, 303);
    let before = status_mib(pid, "VmRSS");
    for _ in 0..3 {
        let burst: Vec<_> = (0..20)
            .map(|i| {
                let portal = portal.clone();
                tokio::spawn(async move { portal.sign_in(names[i % names.len()], PASSWORD).await })
            })
            .collect();
        for s in burst {
            assert_eq!(s.await.expect("sign-in task").status, 303);
        }
    }
    let (after, peak) = (status_mib(pid, "VmRSS"), status_mib(pid, "VmHWM"));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    assert!(
        after <= before + 32,
        "60 sign-ins left {} MiB resident (from {before} MiB to {after} MiB, peak {peak} MiB)",
        after.saturating_sub(before)
    );
    assert!(
        peak <= before + 32 + 20 * cores,
        "the sign-ins' peak was {peak} MiB from {before} MiB: more than a hash a core at once"
    );
}
