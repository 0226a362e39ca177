//! `cohort publish`: `POST /images/publish`, then waits for the operation and prints the new
//! image's fingerprint as lxc does.

use anyhow::bail;
use cohort_proto::api::images::{Image, PublishImage};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::publish::Publish;
use crate::client::seg;
use crate::progress;

pub async fn run(session: &Session, args: Publish) -> anyhow::Result<()> {
    let (client, instance) = session.target(&args.args[0])?;
    let mut description = None;
    for extra in &args.args[1..] {
        if let Some(text) = extra.strip_prefix("description=") {
            description = Some(text.to_string());
        } else if let Some(remote) = extra.strip_suffix(':') {
            if remote != session.config.parse_remote(&args.args[0])?.0 {
                bail!("Publishing to another remote than the instance's is not supported");
            }
        } else {
            bail!("Unknown argument {extra:?}: expected [<remote>:] or description=<text>");
        }
    }
    let request = PublishImage {
        instance,
        alias: args.alias.clone(),
        description,
    };
    let operation: Operation = client.post("/images/publish", &request).await?;
    progress::wait(&client, &operation, session.quiet).await?;
    let image: Image = client.get(&format!("/images/{}", seg(&args.alias))).await?;
    println!("Instance published with fingerprint: {}", image.fingerprint);
    Ok(())
}
