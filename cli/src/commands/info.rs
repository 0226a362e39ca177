//! `cohort info`: an instance in lxc's `Key: value` layout with Cohort's facts added, or, without
//! an instance, who the caller is on the remote (`--resources`: the fleet's nodes and GPUs).

use std::fmt::Write;

use cohort_proto::api::gpus::Gpu;
use cohort_proto::api::instances::{Instance, Snapshot};
use cohort_proto::api::nodes::Node;
use cohort_proto::api::users::Me;

use super::Session;
use crate::args::info::Info;
use crate::client::seg;
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: Info) -> anyhow::Result<()> {
    let Some(raw) = args.instance.as_deref().filter(|r| !r.ends_with(':')) else {
        return server(session, args.instance.as_deref(), args.resources).await;
    };
    let (client, name) = session.target(raw)?;
    let instance: Instance = client.get(&format!("/instances/{}", seg(&name))).await?;
    // Snapshots live on the node; a queued instance has none and no node to ask.
    let snapshots: Vec<Snapshot> = match instance.node {
        Some(_) => {
            client
                .get(&format!("/instances/{}/snapshots", seg(&name)))
                .await?
        }
        None => Vec::new(),
    };
    print!("{}", describe(&instance, &snapshots));
    Ok(())
}

/// lxc's instance layout: `Name`, `Status`, `Type`, `Location`, `Created`, then Cohort's lines
/// and a snapshot table like lxc's.
pub fn describe(instance: &Instance, snapshots: &[Snapshot]) -> String {
    let date = |d: &chrono::DateTime<chrono::Utc>| d.format("%Y/%m/%d %H:%M UTC").to_string();
    let mut out = String::new();
    let state = render::wire_name(instance.observed_state).to_uppercase();
    let _ = writeln!(out, "Name: {}", instance.name);
    let _ = writeln!(out, "Status: {state}");
    let _ = writeln!(out, "Type: container");
    if let Some(node) = &instance.node {
        let _ = writeln!(out, "Location: {node}");
    }
    let _ = writeln!(out, "Created: {}", date(&instance.created_at));
    if let Some(seen) = &instance.last_seen_at {
        let _ = writeln!(out, "Last Seen: {}", date(seen));
    }
    let _ = writeln!(out, "Owner: {}", instance.owner);
    if let Some(course) = &instance.course {
        let _ = writeln!(out, "Course: {course}");
    }
    let _ = writeln!(out, "Image: {}", instance.image);
    let limits = &instance.limits;
    let _ = writeln!(
        out,
        "Limits: {} CPU, {}MiB memory, {}GiB disk",
        limits.cpu, limits.memory_mib, limits.disk_gib
    );
    if let (Some(host), Some(port)) = (&instance.ssh_host, instance.ssh_port) {
        let _ = writeln!(out, "SSH: ssh -p {port} {}@{host}", instance.owner);
        if let Some(key) = &instance.ssh_host_key {
            // The line for ~/.ssh/known_hosts: the first login verifies the host.
            let _ = writeln!(out, "Known Host: [{host}]:{port} {key}");
        }
    }
    if let Some(error) = &instance.error {
        // A queued instance's reason is why it waits, not an error.
        match error.strip_prefix("queued:") {
            Some(why) => {
                let _ = writeln!(out, "Queued: {}", why.trim());
            }
            None => {
                let _ = writeln!(out, "Error: {error}");
            }
        }
    }
    if let Some(reason) = &instance.stop_reason {
        let _ = writeln!(out, "Stop Reason: {reason}");
    }
    if let Some(stopped) = &instance.stopped_at {
        let _ = writeln!(out, "Stopped At: {}", date(stopped));
    }
    if let Some(reason) = &instance.gpu_detach_reason {
        let _ = writeln!(out, "GPUs Detached: {reason}");
    }
    if let Some(detached) = &instance.gpus_detached_at {
        let _ = writeln!(out, "GPUs Detached At: {}", date(detached));
    }
    if let Some(active) = &instance.gpu_active_at {
        let _ = writeln!(out, "GPU Last Used: {}", date(active));
    }
    if !instance.gpus.is_empty() {
        let _ = writeln!(out, "\nGPUs:");
        for gpu in &instance.gpus {
            let _ = writeln!(out, "  {} ({}, slot {})", gpu.model, gpu.uuid, gpu.slot);
        }
    }
    if !instance.gpu_usage.is_empty() {
        let _ = writeln!(out, "\nGPU Use:");
        for line in crate::columns::gpu_use(instance).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !snapshots.is_empty() {
        let mut rows = Rows::new(["NAME", "TAKEN AT", "EXPIRES AT", "STATEFUL"]);
        for snap in snapshots {
            let taken = snap.created_at.as_ref().map(date).unwrap_or_default();
            let stateful = render::yes_no(snap.stateful);
            rows.push([snap.name.as_str(), &taken, "", stateful]);
        }
        let _ = write!(out, "\nSnapshots:\n{}", render::table(&rows));
    }
    out
}

async fn server(session: &Session, remote: Option<&str>, resources: bool) -> anyhow::Result<()> {
    let client = session.remote_only(remote)?;
    if resources {
        let nodes: Vec<Node> = client.get("/nodes").await?;
        let gpus: Vec<Gpu> = client.get("/gpus").await?;
        let doc = serde_json::json!({ "nodes": nodes, "gpus": gpus });
        print!("{}", render::yaml(&doc)?);
        return Ok(());
    }
    let me: Me = client.get("/me").await?;
    let doc = serde_json::json!({
        "url": client.url(),
        "user": me.user.username,
        "role": me.user.role,
        "instances": me.instances.len(),
        "ssh_keys": me.ssh_keys.len(),
    });
    print!("{}", render::yaml(&doc)?);
    Ok(())
}
