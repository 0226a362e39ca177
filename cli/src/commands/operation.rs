//! `cohort operation list|show|wait`: the controller's durable operations.

use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::operation::{Operation as OperationArgs, OperationCommand};
use crate::client::seg;
use crate::progress;
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: OperationArgs) -> anyhow::Result<()> {
    match args.command {
        OperationCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let mut operations: Vec<Operation> = client.get("/operations").await?;
            operations.sort_by_key(|o| o.created_at);
            let mut rows =
                Rows::new(["ID", "TYPE", "DESCRIPTION", "STATUS", "PROGRESS", "CREATED"]);
            for op in &operations {
                rows.push([
                    op.id.to_string(),
                    progress::kind(op),
                    op.target.clone(),
                    render::wire_name(op.status).to_uppercase(),
                    format!(
                        "{}/{} ({} failed)",
                        op.progress.done, op.progress.total, op.progress.failed
                    ),
                    op.created_at.format("%Y/%m/%d %H:%M UTC").to_string(),
                ]);
            }
            render::print(list.format, &rows, &operations)
        }
        OperationCommand::Show(id) => {
            let (client, id) = session.target(&id.operation)?;
            let op: Operation = client.get(&format!("/operations/{}", seg(&id))).await?;
            print!("{}", render::yaml(&op)?);
            Ok(())
        }
        OperationCommand::Wait(id) => {
            let (client, id) = session.target(&id.operation)?;
            let op: Operation = client.get(&format!("/operations/{}", seg(&id))).await?;
            progress::wait(&client, &op, session.quiet).await?;
            Ok(())
        }
    }
}
