//! `cohort publish`: `POST /images/publish` (the instance must be stopped; `--force` stops it).

use cohort_proto::api::images::PublishImage;
use cohort_proto::api::instances::{InstanceStateChange, StateAction};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::publish::Publish;
use crate::client::seg;
use crate::progress;

pub async fn run(session: &Session, args: Publish) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.instance)?;
    if name.contains('/') {
        anyhow::bail!("Publishing a snapshot is not supported; publish the instance itself");
    }
    if args.force {
        let stop = InstanceStateChange {
            action: StateAction::Stop,
            force: false,
            timeout_s: None,
        };
        let path = format!("/instances/{}/state", seg(&name));
        let operation: Operation = client.put(&path, &stop).await?;
        progress::wait(&client, &operation, true).await?;
    }
    let alias = args.alias.clone();
    let request = PublishImage {
        instance: name,
        alias: args.alias,
        description: None,
    };
    let operation: Operation = client.post("/images/publish", &request).await?;
    if !args.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    progress::wait(&client, &operation, session.quiet).await?;
    println!("Instance published with alias: {alias}");
    Ok(())
}
