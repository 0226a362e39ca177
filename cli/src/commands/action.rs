//! `cohort start|stop|restart`: `PUT /instances/{name}/state` for each instance, then wait; like
//! lxc, every instance is tried and the failures are listed together.

use anyhow::bail;
use cohort_proto::api::instances::{Instance, InstanceStateChange, ObservedState, StateAction};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::action::{Restart, Start, Stop};
use crate::client::seg;
use crate::progress;

pub async fn start(session: &Session, args: Start) -> anyhow::Result<()> {
    let change = InstanceStateChange {
        action: StateAction::Start,
        force: false,
        timeout_s: None,
    };
    let names = names(session, args.instances, args.all, ObservedState::Stopped).await?;
    apply(session, &names, &change, "start").await
}

pub async fn stop(session: &Session, args: Stop) -> anyhow::Result<()> {
    let change = stop_change(&args, StateAction::Stop)?;
    let names = names(session, args.instances, args.all, ObservedState::Running).await?;
    apply(session, &names, &change, "stop").await
}

pub async fn restart(session: &Session, args: Restart) -> anyhow::Result<()> {
    let change = stop_change(&args.stop, StateAction::Restart)?;
    let names = names(
        session,
        args.stop.instances,
        args.stop.all,
        ObservedState::Running,
    )
    .await?;
    apply(session, &names, &change, "restart").await
}

fn stop_change(args: &Stop, action: StateAction) -> anyhow::Result<InstanceStateChange> {
    let timeout_s = match args.timeout {
        -1 => None,
        t if t < 0 => bail!("--timeout must be -1 or a number of seconds"),
        t => Some(u32::try_from(t)?),
    };
    Ok(InstanceStateChange {
        action,
        force: args.force,
        timeout_s,
    })
}

/// The instances named, or with `--all` every instance on the default remote in `state`.
async fn names(
    session: &Session,
    named: Vec<String>,
    all: bool,
    state: ObservedState,
) -> anyhow::Result<Vec<String>> {
    if !all {
        return Ok(named);
    }
    if !named.is_empty() {
        bail!("Both --all and instance name given");
    }
    let client = session.remote_only(None)?;
    let instances: Vec<Instance> = client.get_all("/instances").await?;
    Ok(instances
        .into_iter()
        .filter(|i| i.observed_state == state)
        .map(|i| i.name)
        .collect())
}

async fn apply(
    session: &Session,
    names: &[String],
    change: &InstanceStateChange,
    verb: &str,
) -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for raw in names {
        if let Err(e) = apply_one(session, raw, change).await {
            failures.push(format!("{raw}: {e:#}"));
        }
    }
    match failures.as_slice() {
        [] => Ok(()),
        [one] if names.len() == 1 => {
            bail!("{}", one.split_once(": ").map_or(one.as_str(), |(_, e)| e))
        }
        many => bail!("Some instances failed to {verb}:\n{}", many.join("\n")),
    }
}

async fn apply_one(
    session: &Session,
    raw: &str,
    change: &InstanceStateChange,
) -> anyhow::Result<()> {
    let (client, name) = session.target(raw)?;
    let operation: Operation = client
        .put(&format!("/instances/{}/state", seg(&name)), change)
        .await?;
    progress::wait(&client, &operation, true).await?;
    Ok(())
}
