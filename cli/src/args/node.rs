//! `cohort node add|remove|list`: enroll and retire GPU nodes (Cohort's own verb).

use clap::{Args, Subcommand};

use super::TableFormat;

#[derive(Debug, Args)]
pub struct Node {
    #[command(subcommand)]
    pub command: NodeCommand,
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Create a single-use join token for a new node; run `cohort-agent join TOKEN` on it
    Add(NodeAdd),
    /// Remove a node and revoke its certificate
    #[command(visible_alias = "rm")]
    Remove(NodeRemove),
    /// List nodes
    #[command(visible_alias = "ls")]
    List(NodeList),
}

#[derive(Debug, Args)]
pub struct NodeAdd {
    /// [<remote>:]<node>
    pub name: String,
    /// Token lifetime in seconds (default: the controller's, 1 hour)
    #[arg(long)]
    pub expires_in: Option<u64>,
    /// A host name or IP address the controller reaches the node's agent at (repeatable); the
    /// node's certificate carries these and the node name only
    #[arg(long = "address")]
    pub addresses: Vec<String>,
}

#[derive(Debug, Args)]
pub struct NodeRemove {
    /// [<remote>:]<node>
    pub name: String,
}

#[derive(Debug, Args)]
pub struct NodeList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
