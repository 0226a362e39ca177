//! `cohort gpu attach|detach|queue` (`/instances/{name}/gpu-lease`, `/gpu-leases`) and the GPU
//! mode flags of `cohort course set` (`PUT /courses/{code}/gpu-mode`). The controller checks
//! the numbers (a 400 naming the field); here they are only read as numbers.

use anyhow::{bail, Context};
use cohort_proto::api::courses::{Course as CourseInfo, CourseGpuMode, GpuHours, StudentBudget};
use cohort_proto::api::gpu_leases::{GpuLease, GpuLeaseRequest, LeaseState};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::gpu::{Gpu, GpuCommand, GpuModeFlags};
use crate::client::{seg, Client};
use crate::render::{self, Rows};

fn parse_hours(what: &str, h: &str) -> anyhow::Result<GpuHours> {
    let n: f64 = h
        .trim()
        .parse()
        .with_context(|| format!("{what} takes a number of hours, not {h:?}"))?;
    Ok(GpuHours(n))
}

fn hours(h: f64) -> String {
    let s = format!("{h:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One line saying where a lease stands.
fn said(l: &GpuLease) -> String {
    match l.state {
        LeaseState::Active => format!(
            "{}: GPU {} on {} until {} ({} hours)",
            l.instance,
            l.gpu.as_deref().unwrap_or("-"),
            l.node.as_deref().unwrap_or("-"),
            l.ends_at.map_or_else(|| "-".into(), |t| t.to_rfc3339()),
            hours(l.hours.0)
        ),
        LeaseState::Queued => format!(
            "{}: queued, place {} on {}: {}",
            l.instance,
            l.place.unwrap_or(0),
            l.node.as_deref().unwrap_or("-"),
            l.why.as_deref().unwrap_or("")
        ),
        LeaseState::Ended | LeaseState::Cancelled => format!(
            "{}: {}: {}",
            l.instance,
            l.state,
            l.end_reason.as_deref().unwrap_or("")
        ),
    }
}

pub async fn run(session: &Session, args: Gpu) -> anyhow::Result<()> {
    match args.command {
        GpuCommand::Attach(a) => {
            let (client, name) = session.target(&a.name)?;
            let body = GpuLeaseRequest {
                hours: a
                    .hours
                    .as_deref()
                    .map(|h| parse_hours("--hours", h))
                    .transpose()?,
            };
            let lease: GpuLease = client
                .post(&format!("/instances/{}/gpu-lease", seg(&name)), &body)
                .await?;
            println!("{}", said(&lease));
        }
        GpuCommand::Detach(d) => {
            let (client, name) = session.target(&d.name)?;
            let request = client.request(
                reqwest::Method::DELETE,
                &format!("/instances/{}/gpu-lease", seg(&name)),
            );
            let lease: GpuLease = client.json(request).await?;
            println!("{}", said(&lease));
        }
        GpuCommand::Reattach(r) => {
            let (client, name) = session.target(&r.name)?;
            let path = format!("/instances/{}/gpus/attach-again", seg(&name));
            let operation: Operation = client.post(&path, &serde_json::json!({})).await?;
            if !r.wait.resolve(true) {
                println!("{}", operation.id);
                return Ok(());
            }
            crate::progress::wait(&client, &operation, session.quiet).await?;
        }
        GpuCommand::Budget(b) => {
            let client = session.remote_only(b.remote.as_deref())?;
            let budgets: Vec<StudentBudget> = client.get("/me/gpu-budgets").await?;
            let mut rows = Rows::new([
                "COURSE", "PERIOD", "SINCE", "HOURS", "GRANTED", "USED", "LEFT",
            ]);
            for b in &budgets {
                let left = (b.budget_hours.0 + b.granted_hours.0 - b.used_hours.0).max(0.0);
                rows.push([
                    b.course.clone(),
                    b.period.clone(),
                    b.period_start.to_rfc3339(),
                    hours(b.budget_hours.0),
                    hours(b.granted_hours.0),
                    hours(b.used_hours.0),
                    hours(left),
                ]);
            }
            render::print(b.format, &rows, &budgets)?;
        }
        GpuCommand::Queue(q) => {
            let client = session.remote_only(q.remote.as_deref())?;
            let leases: Vec<GpuLease> = client.get("/gpu-leases").await?;
            let mut rows = Rows::new([
                "NODE", "PLACE", "INSTANCE", "USER", "STATE", "HOURS", "GPU", "ENDS", "WHY",
            ]);
            for l in &leases {
                rows.push([
                    l.node.clone().unwrap_or_default(),
                    l.place.map_or_else(String::new, |p| p.to_string()),
                    l.instance.clone(),
                    l.username.clone(),
                    l.state.to_string(),
                    hours(l.hours.0),
                    l.gpu.clone().unwrap_or_default(),
                    l.ends_at.map_or_else(String::new, |t| t.to_rfc3339()),
                    l.why.clone().unwrap_or_default(),
                ]);
            }
            render::print(q.format, &rows, &leases)?;
        }
    }
    Ok(())
}

/// What `course set` asks of the GPU mode: `None` when neither flag was given.
pub fn mode_request(flags: &GpuModeFlags) -> anyhow::Result<Option<GpuModeFlags>> {
    if flags.gpu_mode.is_none() && flags.gpu_lease_max_hours.is_none() {
        return Ok(None);
    }
    if let Some(h) = &flags.gpu_lease_max_hours {
        parse_hours("--gpu-lease-max-hours", h)?;
    }
    Ok(Some(GpuModeFlags {
        gpu_mode: flags.gpu_mode.clone(),
        gpu_lease_max_hours: flags.gpu_lease_max_hours.clone(),
    }))
}

/// `PUT {path}/gpu-mode` with the flags given over the course's mode now.
pub async fn set_mode(client: &Client, path: &str, flags: GpuModeFlags) -> anyhow::Result<()> {
    let course: CourseInfo = client.get(path).await?;
    let gpu_mode = flags.gpu_mode.unwrap_or(course.gpu_mode);
    if gpu_mode != "on-demand" && flags.gpu_lease_max_hours.is_some() {
        bail!("--gpu-lease-max-hours is for an on-demand course: give --gpu-mode on-demand too");
    }
    let body = CourseGpuMode {
        gpu_mode,
        gpu_lease_max_hours: match flags.gpu_lease_max_hours.as_deref() {
            Some(h) => Some(parse_hours("--gpu-lease-max-hours", h)?),
            None => course.gpu_lease_max_hours,
        },
    };
    let _: CourseInfo = client.put(&format!("{path}/gpu-mode"), &body).await?;
    Ok(())
}
