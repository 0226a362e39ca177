//! `cohort node add|remove|list`: join tokens for new nodes, removal (which revokes the node's
//! certificate), and the node list.

use cohort_proto::api::nodes::{CreateJoinToken, JoinTokenIssued, Node};
use reqwest::Method;

use super::{cluster, Session};
use crate::args::node::{Node as NodeArgs, NodeCommand};
use crate::client::seg;
use crate::render;

pub async fn run(session: &Session, args: NodeArgs) -> anyhow::Result<()> {
    match args.command {
        NodeCommand::Add(add) => {
            let (client, name) = session.target(&add.name)?;
            let ttl_seconds = add.expires_in.map(u32::try_from).transpose()?;
            let request = CreateJoinToken {
                node_name: name,
                ttl_seconds,
                addresses: add.addresses,
            };
            let issued: JoinTokenIssued = client.post("/nodes/tokens", &request).await?;
            if !session.quiet {
                eprintln!(
                    "Join token for node {} (single use, expires {}); on the node run:\n  \
                     cohort-agent join TOKEN",
                    issued.node_name,
                    issued.expires_at.format("%Y-%m-%d %H:%M UTC")
                );
            }
            println!("{}", issued.token);
            Ok(())
        }
        NodeCommand::Remove(remove) => {
            let (client, name) = session.target(&remove.name)?;
            let path = format!("/nodes/{}", seg(&name));
            client.call(client.request(Method::DELETE, &path)).await
        }
        NodeCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let mut nodes: Vec<Node> = client.get("/nodes").await?;
            nodes.sort_by(|a, b| a.name.cmp(&b.name));
            render::print(list.format, &cluster::node_rows(&nodes), &nodes)
        }
    }
}
