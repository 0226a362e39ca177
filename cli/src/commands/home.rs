//! `cohort home snapshots NAME`: the snapshots the daemon keeps of a course container's home;
//! `cohort home restore NAME SNAPSHOT [--path P]`: the home back to one (or only `P` copied
//! into `~/restored/<snapshot>/`), then wait (unless `--no-wait`).

use cohort_proto::api::instances::{HomeSnapshot, RestoreHomeRequest};
use cohort_proto::api::operations::Operation;

use super::Session;
use crate::args::home::{Home, HomeCommand};
use crate::client::seg;
use crate::progress;
use crate::render::{self, Rows};

pub async fn run(session: &Session, args: Home) -> anyhow::Result<()> {
    match args.command {
        HomeCommand::Snapshots(list) => {
            let (client, name) = session.target(&list.instance)?;
            let path = format!("/instances/{}/home/snapshots", seg(&name));
            let snapshots: Vec<HomeSnapshot> = client.get(&path).await?;
            let when = |t: Option<chrono::DateTime<chrono::Utc>>| {
                t.map(|t| t.format("%Y/%m/%d %H:%M UTC").to_string())
                    .unwrap_or_default()
            };
            let mut rows = Rows::new(["NAME", "TAKEN AT", "EXPIRES AT"]);
            for snap in &snapshots {
                rows.push([
                    snap.name.clone(),
                    when(snap.created_at),
                    when(snap.expires_at),
                ]);
            }
            render::print(list.format, &rows, &snapshots)
        }
        HomeCommand::Restore(restore) => {
            let (client, name) = session.target(&restore.instance)?;
            let path = format!("/instances/{}/home/restore", seg(&name));
            let body = RestoreHomeRequest {
                snapshot: restore.snapshot,
                path: restore.path,
            };
            let operation: Operation = client.post(&path, &body).await?;
            if !restore.wait.resolve(true) {
                println!("{}", operation.id);
                return Ok(());
            }
            progress::wait(&client, &operation, session.quiet).await?;
            Ok(())
        }
    }
}
