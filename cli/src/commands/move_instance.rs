//! `cohort move NAME --target NODE`: `POST /instances/{name}/move`, then wait (lxc waits too).
//! The controller refuses a node that is unknown, the instance's own, offline, cordoned or
//! short of room, each as an `Error:` line naming it.

use cohort_proto::api::instances::MoveInstance;
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::move_instance::Move;
use crate::client::seg;
use crate::progress;

pub async fn run(session: &Session, args: Move) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.instance)?;
    if args.target.trim().is_empty() {
        anyhow::bail!("--target needs a cluster member name");
    }
    let path = format!("/instances/{}/move", seg(&name));
    let operation: Operation = client
        .post(
            &path,
            &MoveInstance {
                target: args.target,
            },
        )
        .await?;
    if !args.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}
