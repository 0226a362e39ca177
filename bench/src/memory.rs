//! Issue 49's eighth target: the controller's memory over a long mixed load. A real
//! `cohort-controller serve` (built in this benchmark's profile) with `nodes` real nodes, and in
//! rounds until the time is up:
//! - a burst of portal sign-ins at once (argon2id, 19 MiB of memory each), every one signed in;
//! - the portal's pages for a signed-in student, and pages of `GET /api/v1/instances`;
//! - with a node, a course of `students` provisioned, each student's container given an exec with
//!   64 KiB of output and a 1 MiB file written and read back, then torn down with `--delete`.
//!
//! The controller's resident memory is read from `/proc` after every round. Printed: the memory
//! once warm (after the first round), the peak (`VmHWM`), the last, and the slope of a
//! least-squares line through the second half's samples, in MiB an hour: a leak keeps it above
//! zero, a cache filling up to its bound does not.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use cohort_e2e::bodies::{self, course, teardown, to_json, CreateCourse};
use cohort_e2e::cluster::Cluster;
use cohort_e2e::portal::Portal;
use reqwest::Method;
use serde_json::Value;

pub struct Shape {
    pub minutes: f64,
    pub nodes: usize,
    pub students: u32,
    pub sign_ins: u32,
    /// A round starts at most this often (0: at once after the last).
    pub round_s: f64,
}

#[derive(Default)]
pub struct Outcome {
    pub rounds: u32,
    pub sign_ins: u32,
    pub pages: u32,
    pub provisions: u32,
    pub execs: u32,
    pub files: u32,
    pub start_mib: f64,
    pub warm_mib: f64,
    pub peak_mib: f64,
    pub last_mib: f64,
    pub slope_mib_per_hour: f64,
}

/// A size field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
fn status_mib(pid: u32, field: &str) -> Result<f64> {
    cohort_e2e::observe::proc_status_kib(pid, field)
        .map(|kib| kib as f64 / 1024.0)
        .with_context(|| format!("{field} of process {pid}"))
}

/// The slope of the least-squares line through `(x, y)`.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// Sends `req` and returns the status and the JSON body (or Null).
async fn answered(req: reqwest::RequestBuilder) -> Result<(u16, Value)> {
    let res = req.send().await?;
    let status = res.status().as_u16();
    let text = res.text().await?;
    Ok((status, serde_json::from_str(&text).unwrap_or(Value::Null)))
}

/// Starts the operation `path` as `token` and waits for it to succeed.
async fn operation(cluster: &Cluster, path: &str, token: &str, body: Value) -> Result<()> {
    let (status, op) = answered(cluster.request(Method::POST, path, token).json(&body)).await?;
    ensure!(status == 202, "{path}: {status} {op}");
    let id = op["id"].as_str().context("operation id")?;
    let done = cluster.wait_operation(id, Duration::from_secs(600)).await;
    ensure!(done["status"] == "success", "{path}: {done}");
    Ok(())
}

/// One student's container: an exec with 64 KiB of output, and a 1 MiB file written and read back.
async fn instance_io(cluster: &Cluster, name: &str, out: &mut Outcome) -> Result<()> {
    let admin = cluster.admin_token.clone();
    let exec = bodies::exec(&["sh", "-c", "head -c 49152 /dev/urandom | base64 -w0"]);
    let (status, body) = answered(
        cluster
            .request(Method::POST, &format!("/instances/{name}/exec"), &admin)
            .json(&to_json(&exec)),
    )
    .await?;
    ensure!(status == 200, "exec in {name}: {status} {body}");
    out.execs += 1;
    let data: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    let path = format!("/instances/{name}/files?path=/root/soak.bin");
    let res = cluster
        .request(Method::PUT, &path, &admin)
        .body(data.clone())
        .send()
        .await?;
    ensure!(
        res.status().is_success(),
        "file to {name}: {}",
        res.status()
    );
    let back = cluster
        .request(Method::GET, &path, &admin)
        .send()
        .await?
        .bytes()
        .await?;
    ensure!(
        back[..] == data[..],
        "the file read back from {name} differs"
    );
    out.files += 1;
    Ok(())
}

pub fn run(shape: &Shape) -> Result<Outcome> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let cluster = Cluster::start_with_env(shape.nodes, &[("RUST_LOG", "info")]).await;
        let pid = cluster.controller.pid();
        let mut out = Outcome {
            start_mib: status_mib(pid, "VmRSS")?,
            ..Outcome::default()
        };
        let users: Vec<String> = (0..10).map(|i| format!("soak{i}")).collect();
        for name in &users {
            cluster.user(name, "student").await;
            cohort_e2e::browser::set_portal_password(
                &cluster.db_url,
                &cluster.controller_dir(),
                name,
                "a good long password",
            );
        }
        let teacher = cluster.user("soak-teacher", "instructor").await;
        if shape.nodes > 0 {
            cluster.import_base_image("cohort/base").await;
            let made = cluster
                .request(Method::POST, "/courses", &teacher)
                .json(&to_json(&CreateCourse {
                    memory_mib: Some(256),
                    disk_gib: Some(2),
                    ..course("soak", "Soak", "cohort/base")
                }));
            let (status, body) = answered(made).await?;
            ensure!(status == 201, "create the course: {status} {body}");
            let csv: String = std::iter::once("username,name,email,ssh_key\n".to_string())
                .chain((0..shape.students).map(|i| format!("soak-s{i},S{i},,\n")))
                .collect();
            cluster.import_roster(&teacher, "soak", csv).await;
        }
        let portal = Portal::of(&cluster);
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(shape.minutes * 60.0);
        let mut samples = Vec::new();
        while out.rounds == 0 || Instant::now() < deadline {
            let round_started = Instant::now();
            // Sign-ins, all at once.
            let burst: Vec<_> = (0..shape.sign_ins)
                .map(|i| {
                    let (portal, name) = (portal.clone(), users[i as usize % users.len()].clone());
                    tokio::spawn(async move { portal.session(&name, "a good long password").await })
                })
                .collect();
            let mut sessions = Vec::new();
            for s in burst {
                sessions.push(s.await?.context("a sign-in was refused")?);
            }
            out.sign_ins += shape.sign_ins;
            // Pages.
            for session in sessions.iter().take(4) {
                for path in ["/", "/account", "/account/tokens", "/jobs"] {
                    let status = portal.page(path, session).await;
                    ensure!(status == 200, "portal {path}: {status}");
                    out.pages += 1;
                }
            }
            for _ in 0..20 {
                let (status, _) = answered(cluster.request(
                    Method::GET,
                    "/instances?limit=100",
                    &cluster.admin_token,
                ))
                .await?;
                ensure!(status == 200, "the instance list: {status}");
                out.pages += 1;
            }
            // A class's life.
            if shape.nodes > 0 {
                operation(
                    &cluster,
                    "/courses/soak/provision",
                    &teacher,
                    serde_json::json!({}),
                )
                .await?;
                out.provisions += 1;
                let (_, students) =
                    answered(cluster.request(Method::GET, "/courses/soak/students", &teacher))
                        .await?;
                for s in students.as_array().context("students")? {
                    let name = s["instance"].as_str().context("a student's instance")?;
                    instance_io(&cluster, name, &mut out).await?;
                }
                let body = to_json(&teardown(true, false));
                operation(&cluster, "/courses/soak/teardown", &teacher, body).await?;
            }
            out.rounds += 1;
            let rss = status_mib(pid, "VmRSS")?;
            if out.rounds == 1 {
                out.warm_mib = rss;
            }
            samples.push((started.elapsed().as_secs_f64() / 3600.0, rss));
            eprintln!(
                "[memory] round {} at {:.0} s: {rss:.1} MiB",
                out.rounds,
                started.elapsed().as_secs_f64()
            );
            let next = round_started + Duration::from_secs_f64(shape.round_s);
            tokio::time::sleep(next.saturating_duration_since(Instant::now())).await;
        }
        out.peak_mib = status_mib(pid, "VmHWM")?;
        out.last_mib = samples.last().map_or(0.0, |s| s.1);
        out.slope_mib_per_hour = slope(&samples[samples.len() / 2..]);
        let errors = cluster
            .controller_log()
            .lines()
            .filter(|l| l.contains("ERROR"))
            .count();
        ensure!(errors == 0, "the controller logged {errors} errors");
        Ok(out)
    })
}
