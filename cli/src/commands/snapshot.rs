//! `cohort snapshot` and `cohort restore`: the instance's snapshot routes.

use cohort_proto::api::instances::{CreateSnapshot, Snapshot};
use reqwest::Method;

use super::Session;
use crate::args::restore::Restore;
use crate::args::snapshot::Snapshot as SnapshotArgs;
use crate::client::seg;

pub async fn snapshot(session: &Session, args: SnapshotArgs) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.instance)?;
    let base = format!("/instances/{}/snapshots", seg(&name));
    let existing: Vec<Snapshot> = client.get(&base).await?;
    let snapshot = match args.snapshot {
        Some(snapshot) => snapshot,
        None => next_name(&existing),
    };
    if args.reuse && existing.iter().any(|s| s.name == snapshot) {
        let path = format!("{base}/{}", seg(&snapshot));
        client.call(client.request(Method::DELETE, &path)).await?;
    }
    let _: Snapshot = client
        .post(&base, &CreateSnapshot { name: snapshot })
        .await?;
    Ok(())
}

/// lxc's default: `snap<N>` with the first N not taken.
pub fn next_name(existing: &[Snapshot]) -> String {
    (0..)
        .map(|n| format!("snap{n}"))
        .find(|name| existing.iter().all(|s| &s.name != name))
        .expect("an unused name")
}

pub async fn restore(session: &Session, args: Restore) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.instance)?;
    let path = format!(
        "/instances/{}/snapshots/{}/restore",
        seg(&name),
        seg(&args.snapshot)
    );
    client.call(client.request(Method::POST, &path)).await
}
