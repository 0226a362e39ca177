//! `cohort delete`: instances (`DELETE /instances/{name}?force=`) or, for `name/snapshot`, one
//! snapshot.

use anyhow::bail;
use cohort_proto::api::operations::Operation;
use reqwest::Method;

use super::{confirm, Session};
use crate::args::delete::Delete;
use crate::client::seg;
use crate::progress;

pub async fn run(session: &Session, args: Delete) -> anyhow::Result<()> {
    for raw in &args.instances {
        if args.interactive && !confirm(&format!("Remove {raw}?"))? {
            bail!("User aborted delete operation");
        }
        let (client, name) = session.target(raw)?;
        match name.split_once('/') {
            Some((instance, snapshot)) => {
                let path = format!("/instances/{}/snapshots/{}", seg(instance), seg(snapshot));
                client.call(client.request(Method::DELETE, &path)).await?;
            }
            None => {
                let path = format!("/instances/{}?force={}", seg(&name), args.force);
                let request = client.request(Method::DELETE, &path);
                let operation: Operation = client.json(request).await?;
                progress::wait(&client, &operation, session.quiet).await?;
            }
        }
    }
    Ok(())
}
