//! `cohort job ...` (`/jobs`, `/courses/{code}/job-limits`). The controller checks what is
//! given (a 400 naming the field); here only `--env` and the numbers are read.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use cohort_proto::api::batch_jobs::{Job, JobLog, JobPriority, SubmitJob};
use cohort_proto::api::courses::{CourseJobLimits, GpuHours};

use super::Session;
use crate::args::job::{Job as JobArgs, JobCommand};
use crate::client::{seg, Client};
use crate::render::{self, Rows};

/// A job id as given (`[<remote>:]<id>`), with its remote's client.
fn job_of(session: &Session, raw: &str) -> anyhow::Result<(Client, i64)> {
    let (client, id) = session.target(raw)?;
    let id = id
        .parse::<i64>()
        .with_context(|| format!("a job is named by its number, not {id:?}"))?;
    Ok((client, id))
}

fn hours(h: f64) -> String {
    let s = format!("{h:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn time(t: Option<chrono::DateTime<chrono::Utc>>) -> String {
    t.map_or_else(String::new, |t| t.to_rfc3339())
}

/// `cohort job show`'s lines.
fn shown(j: &Job) -> String {
    let mut lines = vec![
        format!("Job: {}", j.id),
        format!("State: {}", j.state),
        format!("Instance: {}", j.instance),
        format!("User: {}", j.username),
    ];
    if let Some(c) = &j.course {
        lines.push(format!("Course: {c}"));
    }
    lines.push(format!("Command: {}", j.command.join(" ")));
    if let Some(w) = &j.workdir {
        lines.push(format!("Workdir: ~/{w}"));
    }
    lines.push(format!("GPUs: {}", j.gpus));
    lines.push(format!("Hours: {}", hours(j.hours.0)));
    lines.push(format!("Priority: {}", j.priority));
    if let Some(p) = j.place {
        lines.push(format!("Place: {p}"));
    }
    if let Some(w) = &j.why {
        lines.push(format!("Why: {w}"));
    }
    if let Some(n) = &j.node {
        lines.push(format!("Node: {n}"));
    }
    if let Some(g) = &j.gpu {
        lines.push(format!("GPU: {g}"));
    }
    lines.push(format!("Submitted: {}", j.submitted_at.to_rfc3339()));
    for (what, at) in [
        ("Started", j.started_at),
        ("Ends", j.ends_at),
        ("Ended", j.ended_at),
    ] {
        if at.is_some() {
            lines.push(format!("{what}: {}", time(at)));
        }
    }
    if let Some(c) = j.exit_code {
        lines.push(format!("Exit code: {c}"));
    }
    if let Some(r) = &j.reason {
        lines.push(format!("Reason: {r}"));
    }
    lines.push(format!("GPU-seconds: {:.0}", j.gpu_seconds));
    lines.push(format!("Log: {}", j.log_path));
    lines.join("\n")
}

pub async fn run(session: &Session, args: JobArgs) -> anyhow::Result<()> {
    match args.command {
        JobCommand::Submit(s) => {
            let (client, name) = session.target(&s.name)?;
            let mut environment = BTreeMap::new();
            for kv in &s.env {
                let Some((k, v)) = kv.split_once('=') else {
                    bail!("--env takes K=V, not {kv:?}");
                };
                environment.insert(k.to_string(), v.to_string());
            }
            let hours = match s.hours.as_deref() {
                Some(h) => Some(GpuHours(h.trim().parse().with_context(|| {
                    format!("--hours takes a number of hours, not {h:?}")
                })?)),
                None => None,
            };
            let body = SubmitJob {
                instance: name,
                command: s.command,
                gpus: Some(s.gpus),
                hours,
                workdir: s.workdir,
                environment,
            };
            let job: Job = client.post("/jobs", &body).await?;
            if s.id_only {
                println!("{}", job.id);
            } else {
                println!(
                    "Job {} {} ({}); its log: {}",
                    job.id,
                    job.state,
                    job.why.as_deref().unwrap_or("submitted"),
                    job.log_path
                );
            }
        }
        JobCommand::List(l) => {
            let client = session.remote_only(l.remote.as_deref())?;
            let mut query = Vec::new();
            for (k, v) in [
                ("course", &l.course),
                ("user", &l.user),
                ("state", &l.state),
            ] {
                if let Some(v) = v {
                    query.push(format!("{k}={}", seg(v)));
                }
            }
            let path = if query.is_empty() {
                "/jobs".to_string()
            } else {
                format!("/jobs?{}", query.join("&"))
            };
            let jobs: Vec<Job> = client.get(&path).await?;
            let mut rows = Rows::new([
                "ID", "INSTANCE", "USER", "STATE", "GPUS", "PLACE", "STARTED", "EXIT", "COMMAND",
            ]);
            for j in &jobs {
                rows.push([
                    j.id.to_string(),
                    j.instance.clone(),
                    j.username.clone(),
                    j.state.to_string(),
                    j.gpus.to_string(),
                    j.place.map_or_else(String::new, |p| p.to_string()),
                    time(j.started_at),
                    j.exit_code.map_or_else(String::new, |c| c.to_string()),
                    j.command.join(" "),
                ]);
            }
            render::print(l.format, &rows, &jobs)?;
        }
        JobCommand::Show(t) => {
            let (client, id) = job_of(session, &t.id)?;
            let job: Job = client.get(&format!("/jobs/{id}")).await?;
            println!("{}", shown(&job));
        }
        JobCommand::Cancel(t) => {
            let (client, id) = job_of(session, &t.id)?;
            let job: Job = client
                .post(&format!("/jobs/{id}/cancel"), &serde_json::json!({}))
                .await?;
            println!("Job {} {}", job.id, job.state);
        }
        JobCommand::Priority(p) => {
            let (client, id) = job_of(session, &p.id)?;
            let priority: i32 =
                p.priority.trim().parse().with_context(|| {
                    format!("a priority is a whole number, not {:?}", p.priority)
                })?;
            let job: Job = client
                .put(&format!("/jobs/{id}/priority"), &JobPriority { priority })
                .await?;
            println!("Job {} priority {}", job.id, job.priority);
        }
        JobCommand::Limits(l) => {
            let (client, code) = session.target(&l.course)?;
            let body = CourseJobLimits {
                max_running: l.running,
                max_queued: l.queued,
            };
            let set: CourseJobLimits = client
                .put(&format!("/courses/{}/job-limits", seg(&code)), &body)
                .await?;
            println!(
                "Course {code}: {} running and {} waiting per student",
                set.max_running, set.max_queued
            );
        }
        JobCommand::Logs(l) => {
            let (client, id) = job_of(session, &l.id)?;
            let mut offset = 0u64;
            let mut out = std::io::stdout();
            loop {
                let log: JobLog = client
                    .get(&format!("/jobs/{id}/log?offset={offset}"))
                    .await?;
                out.write_all(log.text.as_bytes())?;
                out.flush()?;
                let read = log.next_offset - offset;
                offset = log.next_offset;
                if !l.follow || (log.done && read == 0) {
                    break;
                }
                if read == 0 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
    Ok(())
}
