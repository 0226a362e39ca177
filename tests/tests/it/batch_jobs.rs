//! Issue 44, batch jobs, on a real node (LXD), PostgreSQL, a controller process and an agent
//! process (each killed -9 and started again while a job runs) and the `cohort` binary:
//! - a student's job runs in their container as them, in their home or a directory under it,
//!   with its environment; its exit code, stdout and stderr are recorded, and its log is also
//!   `~/.cohort/jobs/ID.log` in the container;
//! - bad input is a 4xx (or the CLI's `Error:`) naming the field, with nothing queued;
//! - the course's limits: one job running per student, the next waits and says why; a full
//!   queue refuses; a waiting job is cancelled at once, a running one is stopped (TERM);
//! - a job survives the controller's and the agent's kill -9 and ends with its own exit code
//!   and log;
//! - a job at its time limit is warned in its log, then stopped, `killed` with the reason;
//! - a stopped container kills its job, with the reason.
//!
//! The second test runs the same on an Incus node. Jobs with GPUs (the lease, fair order, the
//! GPU given back) are in the serial `batch_gpu_jobs`, with the node faked at its seam: no GPU
//! exists here.

use std::time::{Duration, Instant};

use cohort_e2e::bodies::{self, course, to_json, CreateCourse};
use cohort_e2e::browser::{set_portal_password, Browser};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::lxd::TestDaemon;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestLxd};
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli_support::Cli;

fn cli_as(cluster: &Cluster, token: &str) -> Cli {
    Cli::of_cluster(cluster, token)
}

/// A call whatever its outcome: status and JSON.
async fn raw(
    cluster: &Cluster,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = cluster.request(method, path, token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.expect("send");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn job(cluster: &Cluster, token: &str, id: i64) -> Value {
    let (status, job) = raw(cluster, token, Method::GET, &format!("/jobs/{id}"), None).await;
    assert_eq!(status, 200, "{job}");
    job
}

/// Waits (at most `within`) until job `id` is in one of `states`; answers it.
async fn until_state(
    cluster: &Cluster,
    token: &str,
    id: i64,
    states: &[&str],
    within: Duration,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let j = job(cluster, token, id).await;
        if states.iter().any(|s| j["state"] == *s) {
            return j;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} not {states:?} within {within:?}: {j}\n{}",
            cluster.controller_log()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `cohort job submit` as `cli`: the job's id.
fn submit(cli: &Cli, args: &[&str]) -> i64 {
    let mut all = vec!["job", "submit", "--id-only"];
    all.extend_from_slice(args);
    cli.ok(&all).trim().parse().expect("a job id")
}

fn jobs_of(cluster: &Cluster) -> i64 {
    use diesel::prelude::*;
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let mut conn = PgConnection::establish(&cluster.db_url).expect("database");
    diesel::sql_query("SELECT count(*) AS n FROM batch_jobs")
        .get_result::<N>(&mut conn)
        .expect("count")
        .n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_students_job_runs_as_them_survives_restarts_and_ends_with_its_code() {
    let started = Instant::now();
    // A lease hour of 10 minutes: a job of 0.05 hours has 30 s, warned 3 s before.
    let fast = [
        ("COHORT_JOB_INTERVAL_S", "1"),
        ("COHORT_GPU_LEASE_HOUR_S", "600"),
    ];
    let mut cluster = Cluster::start_configured(0, None, &fast).await;
    cluster
        .add_node_in("jobs-lxd", TestLxd::on(TestDaemon::Lxd))
        .await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof-jobs", "instructor").await;
    cluster
        .create_course(
            &prof,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course("jobs", "Jobs", "cohort/base")
            },
        )
        .await;
    let (ann_key, bob_key) = (SshKey::generate(), SshKey::generate());
    let roster = format!(
        "username,name,email,ssh_key\nann-jobs,Ann,,{}\nbob-jobs,Bob,,{}\n",
        ann_key.public_key(),
        bob_key.public_key()
    );
    cluster.import_roster(&prof, "jobs", roster).await;
    let op = cluster.provision("jobs", &prof).await;
    assert_eq!(op["status"], "success", "{op}");
    let ann_token = cluster.token_for("ann-jobs").await;
    let ann = cli_as(&cluster, &ann_token);
    let bob_token = cluster.token_for("bob-jobs").await;
    let staff = cli_as(&cluster, &prof);
    let admin = cli_as(&cluster, &cluster.admin_token);
    let name = "jobs-ann-jobs";
    eprintln!("[batch_jobs] course provisioned at {:?}", started.elapsed());

    // A job runs as Ann, in her home, with its environment; output and exit code recorded.
    let first = submit(
        &ann,
        &[
            "lab:jobs-ann-jobs",
            "--env",
            "GREETING=hello there",
            "--",
            "sh",
            "-c",
            "mkdir -p runs/a && echo \"$GREETING from $(id -un) in $(pwd)\"; echo oops >&2; exit 3",
        ],
    );
    let done = until_state(
        &cluster,
        &ann_token,
        first,
        &["failed", "succeeded"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("failed"), &json!(3)),
        "{done}"
    );
    assert_eq!(done["reason"], "exited with code 3", "{done}");
    let log = ann.ok(&["job", "logs", &format!("lab:{first}")]);
    assert!(
        log.contains("hello there from ann-jobs in /home/ann-jobs") && log.contains("oops"),
        "{log}"
    );
    let in_container = cluster.nodes[0].lxd.lxc(&[
        "exec",
        name,
        "--",
        "cat",
        &format!("/home/ann-jobs/.cohort/jobs/{first}.log"),
    ]);
    assert_eq!(in_container, log, "the log in the container");
    let owner = cluster.nodes[0].lxd.lxc(&[
        "exec",
        name,
        "--",
        "stat",
        "-c",
        "%U",
        &format!("/home/ann-jobs/.cohort/jobs/{first}.log"),
    ]);
    assert_eq!(owner.trim(), "ann-jobs");
    // In a directory under the home; exit 0 is success.
    let second = submit(
        &ann,
        &["lab:jobs-ann-jobs", "--workdir", "runs/a", "--", "pwd"],
    );
    let done = until_state(
        &cluster,
        &ann_token,
        second,
        &["failed", "succeeded"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("succeeded"), &json!(0)),
        "{done}"
    );
    let log = ann.ok(&["job", "logs", &format!("lab:{second}")]);
    assert_eq!(log.trim(), "/home/ann-jobs/runs/a");
    let shown = ann.ok(&["job", "show", &format!("lab:{second}")]);
    assert!(
        shown.contains("State: succeeded") && shown.contains("Exit code: 0"),
        "{shown}"
    );

    // Bad input: a 4xx naming the field, nothing queued.
    let before = jobs_of(&cluster);
    let nul = "a\u{0}b";
    for (body, status, field) in [
        (json!({"instance": name, "command": []}), 400, "command"),
        (
            json!({"instance": name, "command": ["echo", nul]}),
            400,
            "command.1",
        ),
        (
            json!({"instance": name, "command": ["true"], "workdir": "/etc"}),
            400,
            "workdir",
        ),
        (
            json!({"instance": name, "command": ["true"], "workdir": "../bob-jobs"}),
            400,
            "workdir",
        ),
        (
            json!({"instance": name, "command": ["true"], "gpus": 1}),
            400,
            "gpus",
        ),
        (
            json!({"instance": name, "command": ["true"], "hours": 0}),
            400,
            "hours",
        ),
        (
            json!({"instance": name, "command": ["true"], "environment": {"1A": "x"}}),
            400,
            "environment.1A",
        ),
    ] {
        let (got, answer) = raw(
            &cluster,
            &ann_token,
            Method::POST,
            "/jobs",
            Some(body.clone()),
        )
        .await;
        assert_eq!(got, status, "{body}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{body}: {answer}");
    }
    let (got, answer) = raw(
        &cluster,
        &bob_token,
        Method::POST,
        "/jobs",
        Some(to_json(&bodies::job(name, &["true"]))),
    )
    .await;
    assert!(
        got == 403 || got == 404,
        "Bob in Ann's container: {got} {answer}"
    );
    let err = ann.run(&[
        "job",
        "submit",
        "lab:jobs-ann-jobs",
        "--hours",
        "abc",
        "--",
        "true",
    ]);
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("Error: --hours"),
        "{err:?}"
    );
    assert_eq!(jobs_of(&cluster), before, "nothing queued by bad input");
    // Bob cannot see Ann's job.
    let (got, _) = raw(
        &cluster,
        &bob_token,
        Method::GET,
        &format!("/jobs/{first}"),
        None,
    )
    .await;
    assert_eq!(got, 404);

    // One running per student: the next waits, saying why; a waiting job is cancelled at once.
    let long = submit(
        &ann,
        &[
            "lab:jobs-ann-jobs",
            "--",
            "sh",
            "-c",
            "sleep 25; echo finished; exit 7",
        ],
    );
    until_state(
        &cluster,
        &ann_token,
        long,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    let waiting = submit(&ann, &["lab:jobs-ann-jobs", "--", "true"]);
    let w = job(&cluster, &ann_token, waiting).await;
    assert_eq!(w["state"], "queued", "{w}");
    assert!(
        w["why"].as_str().unwrap_or("").contains("max_running is 1"),
        "{w}"
    );
    ann.ok(&["job", "cancel", &format!("lab:{waiting}")]);
    let w = job(&cluster, &ann_token, waiting).await;
    assert_eq!(
        (&w["state"], &w["reason"]),
        (&json!("cancelled"), &json!("cancelled by ann-jobs")),
        "{w}"
    );
    // The course's limits: one waiting at most; the second is refused naming `jobs`.
    staff.ok(&[
        "job",
        "limits",
        "lab:jobs",
        "--running",
        "1",
        "--queued",
        "1",
    ]);
    let next = submit(&ann, &["lab:jobs-ann-jobs", "--", "sleep", "600"]);
    let (got, answer) = raw(
        &cluster,
        &ann_token,
        Method::POST,
        "/jobs",
        Some(to_json(&bodies::job(name, &["true"]))),
    )
    .await;
    assert_eq!(
        (got, &answer["error"]["field"]),
        (409, &json!("jobs")),
        "{answer}"
    );

    // The controller and the agent each killed -9 while the job runs: it ends with its code.
    cluster.restart_controller();
    cluster.nodes[0].restart();
    let done = until_state(
        &cluster,
        &ann_token,
        long,
        &["failed", "succeeded", "killed"],
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("failed"), &json!(7)),
        "{done}"
    );
    assert!(ann
        .ok(&["job", "logs", &format!("lab:{long}")])
        .contains("finished"));
    eprintln!(
        "[batch_jobs] survived the restarts at {:?}",
        started.elapsed()
    );

    // The waiting one starts; cancelled while it runs, it is stopped (TERM: 143).
    until_state(
        &cluster,
        &ann_token,
        next,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    ann.ok(&["job", "cancel", &format!("lab:{next}")]);
    let done = until_state(
        &cluster,
        &ann_token,
        next,
        &["cancelled", "failed", "killed"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("cancelled"), &json!(143)),
        "{done}"
    );
    let ps = cluster.nodes[0]
        .lxd
        .lxc(&["exec", name, "--", "ps", "-eo", "args"]);
    assert!(
        !ps.contains("sleep 600"),
        "the cancelled job's process is gone: {ps}"
    );

    // At its limit (0.05 hours: 30 s here) a job is warned in its log, then stopped.
    let limited = submit(
        &ann,
        &["lab:jobs-ann-jobs", "--hours", "0.05", "--", "sleep", "600"],
    );
    let done = until_state(
        &cluster,
        &ann_token,
        limited,
        &["killed", "failed", "cancelled"],
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(done["state"], "killed", "{done}");
    assert!(
        done["reason"]
            .as_str()
            .unwrap_or("")
            .contains("reached its time limit of 0.05 hours"),
        "{done}"
    );
    let log = ann.ok(&["job", "logs", &format!("lab:{limited}")]);
    assert!(
        log.contains(&format!("cohort: job {limited} reaches its time limit at")),
        "{log}"
    );

    // The portal: Ann submits from her browser (a bad directory refused at its field, nothing
    // queued), and the job's page tails its output while it runs.
    set_portal_password(
        &cluster.db_url,
        &cluster.controller_dir(),
        "ann-jobs",
        "jobs 4 all ann",
    );
    let ports = PortRange::claim();
    let browser = Browser::start(ports.port(0), "en").await;
    let base = cluster.controller.url();
    browser.sign_in(&base, "ann-jobs", "jobs 4 all ann").await;
    browser.goto(&format!("{base}/jobs")).await;
    let before = jobs_of(&cluster);
    browser.type_into("#job-command", "echo hi").await;
    browser.type_into("#job-workdir", "/etc").await;
    browser.click("#submit-job-button").await;
    let refused = browser.text("#job-workdir-error").await;
    assert!(refused.contains("home directory"), "{refused}");
    assert_eq!(jobs_of(&cluster), before, "nothing queued");
    browser.type_into("#job-workdir", "").await;
    browser
        .type_into(
            "#job-command",
            "for i in 1 2 3 4 5 6; do echo tick $i; sleep 2; done",
        )
        .await;
    browser.click("#submit-job-button").await;
    let url = browser.url().await;
    let portal_job: i64 = url
        .rsplit('/')
        .next()
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("a job's page: {url}"));
    let shown_text =
        |id: &'static str| format!("return document.getElementById('{id}')?.textContent || ''");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut live = false;
    loop {
        let log = browser.run(&shown_text("job-log")).await;
        let log = log.as_str().unwrap_or_default().to_string();
        if log.contains("tick 1") && !log.contains("tick 6") {
            let j = job(&cluster, &ann_token, portal_job).await;
            live |= j["state"] == "running";
        }
        let exit = browser.run(&shown_text("job-exit")).await;
        if exit == json!("0") && log.contains("tick 6") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the page never showed the whole output: {log:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(live, "the output showed while the job ran");

    // A stopped container kills its job, with the reason.
    let stopped = submit(&ann, &["lab:jobs-ann-jobs", "--", "sleep", "600"]);
    until_state(
        &cluster,
        &ann_token,
        stopped,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    admin.ok(&["stop", "lab:jobs-ann-jobs", "--force"]);
    let done = until_state(
        &cluster,
        &ann_token,
        stopped,
        &["killed", "failed"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(done["state"], "killed", "{done}");
    assert!(
        done["reason"]
            .as_str()
            .unwrap_or("")
            .contains("was stopped"),
        "{done}"
    );

    // The lists: Ann's own, the staff's view of the course; audited.
    let listed = staff.ok(&["job", "list", "lab:", "--course", "jobs", "-f", "csv"]);
    assert_eq!(listed.lines().count(), 8, "{listed}");
    let (_, bobs) = raw(&cluster, &bob_token, Method::GET, "/jobs", None).await;
    assert_eq!(bobs, json!([]), "Bob sees none of Ann's jobs");
    let audit = admin.ok(&["audit", "list", "-f", "csv"]);
    assert!(
        audit.contains("submit_job")
            && audit.contains("cancel_job")
            && audit.contains("set_job_limits"),
        "{audit}"
    );
    eprintln!("[batch_jobs] done at {:?}", started.elapsed());
}

/// The same job files and execs on an Incus node: a job runs as its student with its
/// environment, in a directory under the home; one survives the agent's kill -9 and ends with
/// its own code; a cancelled one is stopped; a reset container kills its job.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_on_an_incus_node_runs_as_its_student_and_survives_the_agent() {
    let fast = [("COHORT_JOB_INTERVAL_S", "1")];
    let mut cluster = Cluster::start_configured(0, None, &fast).await;
    cluster
        .add_node_in("jobs-incus", TestLxd::on(TestDaemon::Incus))
        .await;
    cluster.import_base_image("cohort/base").await;
    let prof = cluster.user("prof-ji", "instructor").await;
    cluster
        .create_course(
            &prof,
            CreateCourse {
                cpu: Some(1),
                memory_mib: Some(256),
                disk_gib: Some(2),
                ..course("ji", "Jobs on Incus", "cohort/base")
            },
        )
        .await;
    let key = SshKey::generate();
    let roster = format!(
        "username,name,email,ssh_key\ncai-ji,Cai,,{}\n",
        key.public_key()
    );
    cluster.import_roster(&prof, "ji", roster).await;
    let op = cluster.provision("ji", &prof).await;
    assert_eq!(op["status"], "success", "{op}");
    let token = cluster.token_for("cai-ji").await;
    let cai = cli_as(&cluster, &token);

    let first = submit(
        &cai,
        &[
            "lab:ji-cai-ji",
            "--env",
            "WHO=incus",
            "--",
            "sh",
            "-c",
            "mkdir -p w && cd w && echo \"$WHO $(id -un) $(pwd)\"",
        ],
    );
    let done = until_state(
        &cluster,
        &token,
        first,
        &["failed", "succeeded"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("succeeded"), &json!(0)),
        "{done}"
    );
    let log = cai.ok(&["job", "logs", &format!("lab:{first}")]);
    assert_eq!(log.trim(), "incus cai-ji /home/cai-ji/w");

    let long = submit(
        &cai,
        &[
            "lab:ji-cai-ji",
            "--workdir",
            "w",
            "--",
            "sh",
            "-c",
            "sleep 12; pwd; exit 4",
        ],
    );
    until_state(
        &cluster,
        &token,
        long,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    cluster.nodes[0].restart();
    let done = until_state(
        &cluster,
        &token,
        long,
        &["failed", "succeeded", "killed"],
        Duration::from_secs(90),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("failed"), &json!(4)),
        "{done}"
    );
    assert_eq!(
        cai.ok(&["job", "logs", &format!("lab:{long}")]).trim(),
        "/home/cai-ji/w"
    );

    let cancelled = submit(&cai, &["lab:ji-cai-ji", "--", "sleep", "600"]);
    until_state(
        &cluster,
        &token,
        cancelled,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    cai.ok(&["job", "cancel", &format!("lab:{cancelled}")]);
    let done = until_state(
        &cluster,
        &token,
        cancelled,
        &["cancelled", "failed", "killed"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        (&done["state"], &done["exit_code"]),
        (&json!("cancelled"), &json!(143)),
        "{done}"
    );

    // A reset container kills its job, with the reason.
    let reset = submit(&cai, &["lab:ji-cai-ji", "--", "sleep", "600"]);
    until_state(
        &cluster,
        &token,
        reset,
        &["running"],
        Duration::from_secs(60),
    )
    .await;
    let staff = cli_as(&cluster, &prof);
    staff.ok(&["course", "student", "reset", "lab:ji", "cai-ji"]);
    let done = until_state(
        &cluster,
        &token,
        reset,
        &["killed", "failed", "cancelled"],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(done["state"], "killed", "{done}");
    let reason = done["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("container ji-cai-ji"), "{done}");
}
