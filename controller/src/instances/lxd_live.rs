//! What a node's LXD says of its instances right now, read for the LXD-style API: LXD's own
//! `state` objects (status, addresses per interface, memory, CPU, disk, processes), which
//! `lxc list -c 4`, `lxc list -f json` and `lxc info` show as LXD gives them, and the console
//! log (`lxc console --show-log`). Reads only; Cohort keeps none of it.

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::Value;

use crate::accounts::auth::Caller;
use crate::app::state::{connect_node, Controller};
use crate::db::models::node::Node;
use crate::error::{ActionError, ActionResult};
use crate::instances::manage::agent_of;

/// How long a listing waits for one node's states: a node slower than this leaves its
/// instances with the state Cohort has recorded, so one slow node does not hold `lxc list`.
const LISTING_WAIT: Duration = Duration::from_secs(10);

/// LXD's state object of an instance the caller may see.
pub async fn state(ctl: &Controller, caller: Caller, name: String) -> ActionResult<Value> {
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    agent
        .lxd_state(name)
        .await
        .map_err(ActionError::on_node(node))
}

/// The console log of an instance the caller may see, as LXD keeps it.
pub async fn console_log(
    ctl: &Controller,
    caller: Caller,
    name: String,
) -> ActionResult<bytes::Bytes> {
    let (node, agent) = agent_of(ctl, caller, name.clone()).await?;
    agent
        .console_log(name)
        .await
        .map_err(ActionError::on_node(node))
}

/// LXD's state objects of every instance on the named nodes, by (node, instance), one call per
/// node at once. A node that cannot be reached, or answers late, is left out: the caller shows
/// what Cohort recorded for its instances. The caller filters what it may show (this reads
/// whole nodes).
pub async fn states_on(
    ctl: &Controller,
    nodes: Vec<String>,
) -> ActionResult<BTreeMap<(String, String), Value>> {
    let agents = ctl.agents.clone();
    let reachable = ctl
        .db(move |conn| {
            let mut reachable = Vec::new();
            for name in nodes {
                let Some(node) = Node::by_name(conn, &name)? else {
                    continue;
                };
                if let Ok(agent) = connect_node(agents.as_ref(), conn, &node) {
                    reachable.push((name, agent));
                }
            }
            Ok(reachable)
        })
        .await?;
    let answers = join_all(reachable.into_iter().map(|(node, agent)| async move {
        match tokio::time::timeout(LISTING_WAIT, agent.lxd_states()).await {
            Ok(Ok(states)) => Some((node, states)),
            Ok(Err(e)) => {
                tracing::info!(%node, error = %e, "no live states for an LXD-style listing");
                None
            }
            Err(_) => {
                tracing::info!(%node, "live states for an LXD-style listing came too late");
                None
            }
        }
    }))
    .await;
    Ok(answers
        .into_iter()
        .flatten()
        .flat_map(|(node, states)| {
            states
                .into_iter()
                .map(move |(name, state)| ((node.clone(), name), state))
        })
        .collect())
}
