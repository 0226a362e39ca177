//! `cohort cluster`: Cohort's nodes shown and drained through lxc's cluster verbs.

use cohort_proto::api::nodes::{EvacuateNode, EvacuatePolicy, Node};
use cohort_proto::api::operations::Operation;

use super::{confirm, Session};
use crate::args::cluster::{Cluster, ClusterCommand, EvacuateAction, MemberAction};
use crate::client::seg;
use crate::render::{self, Rows};
use crate::{progress, units};

pub async fn run(session: &Session, args: Cluster) -> anyhow::Result<()> {
    match args.command {
        ClusterCommand::List(list) => {
            let client = session.remote_only(list.remote.as_deref())?;
            let mut nodes: Vec<Node> = client.get("/nodes").await?;
            nodes.sort_by(|a, b| a.name.cmp(&b.name));
            render::print(list.format, &node_rows(&nodes), &nodes)
        }
        ClusterCommand::Show(member) => {
            let (client, name) = session.target(&member.member)?;
            let node: Node = client.get(&format!("/nodes/{}", seg(&name))).await?;
            print!("{}", render::yaml(&node)?);
            Ok(())
        }
        ClusterCommand::Evacuate(action) => drain(session, action, "evacuate").await,
        ClusterCommand::Restore(action) => drain(session, action, "restore").await,
    }
}

/// `lxd 5.0.2`, `incus 6.0.4`: the daemon the node's agent drives, once it has reported; `-`
/// before its first report.
fn daemon_cell(node: &Node) -> String {
    match (&node.daemon, &node.lxd_version) {
        (Some(daemon), Some(version)) => format!("{daemon} {version}"),
        (None, Some(version)) => format!("lxd {version}"),
        _ => "-".into(),
    }
}

/// lxc's cluster list columns that apply (NAME, URL, STATE), the capacity Cohort schedules on,
/// and the daemon each node runs (a lab can mix LXD and Incus nodes).
pub fn node_rows(nodes: &[Node]) -> Rows {
    let mut rows = Rows::new([
        "NAME",
        "URL",
        "STATE",
        "SSH",
        "CPU",
        "MEMORY",
        "DISK FREE",
        "GPUS",
        "INSTANCES",
        "DAEMON",
        "CERT EXPIRES",
    ]);
    for node in nodes {
        rows.push([
            node.name.clone(),
            node.agent_url.clone(),
            render::wire_name(node.state).to_uppercase(),
            format!(
                "{}:{}-{}",
                node.ssh_host, node.ssh_port_first, node.ssh_port_last
            ),
            node.cores.to_string(),
            units::byte_size(node.memory_bytes),
            units::byte_size(node.disk_free_bytes),
            node.gpus.to_string(),
            node.instances.to_string(),
            daemon_cell(node),
            node.certificate_expires_at.map_or_else(
                || "EXPIRED".to_string(),
                |at| at.format("%Y-%m-%d %H:%M").to_string(),
            ),
        ]);
    }
    rows
}

async fn drain(session: &Session, args: MemberAction, verb: &str) -> anyhow::Result<()> {
    let (client, name) = session.target(&args.member)?;
    if !args.force {
        let question = format!("Are you sure you want to {verb} cluster member {name:?}?");
        if !confirm(&question)? {
            return Ok(());
        }
    }
    let path = format!("/nodes/{}/{verb}", seg(&name));
    let operation: Operation = if verb == "evacuate" {
        let policy = match args.action {
            Some(EvacuateAction::Migrate) => EvacuatePolicy::Move,
            Some(EvacuateAction::Stop) | None => EvacuatePolicy::Stop,
        };
        client.post(&path, &EvacuateNode { policy }).await?
    } else {
        client.post(&path, &serde_json::json!({})).await?
    };
    if !args.wait.resolve(true) {
        println!("{}", operation.id);
        return Ok(());
    }
    progress::wait(&client, &operation, session.quiet).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use cohort_proto::api::nodes::NodeState;

    use super::*;

    fn node(daemon: Option<&str>, version: Option<&str>) -> Node {
        Node {
            name: "n1".into(),
            agent_url: "https://n1:9443".into(),
            ssh_host: "n1".into(),
            ssh_port_first: 20000,
            ssh_port_last: 20099,
            state: NodeState::Online,
            cores: 2,
            memory_bytes: 1 << 30,
            disk_total_bytes: 1 << 30,
            disk_free_bytes: 1 << 30,
            daemon: daemon.map(str::to_string),
            lxd_version: version.map(str::to_string),
            storage_driver: None,
            nvidia_runtime: false,
            gpus: 0,
            instances: 0,
            last_heartbeat_at: None,
            enrolled_at: chrono::Utc::now(),
            certificate_expires_at: None,
        }
    }

    #[test]
    fn each_node_shows_its_daemon_and_version() {
        assert_eq!(
            daemon_cell(&node(Some("incus"), Some("6.0.4"))),
            "incus 6.0.4"
        );
        assert_eq!(daemon_cell(&node(Some("lxd"), Some("5.0.2"))), "lxd 5.0.2");
        // A node polled before the controller stored daemons ran LXD.
        assert_eq!(daemon_cell(&node(None, Some("5.0.2"))), "lxd 5.0.2");
        assert_eq!(daemon_cell(&node(None, None)), "-");
    }
}
