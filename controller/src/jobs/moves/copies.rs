//! Where a moving instance's copies really are, asked of both nodes' agents before a move
//! deletes anything. The database cannot be trusted for this: a backup restored from the middle
//! of an evacuation, or a second run of the same step, names a source whose copy is already
//! gone while the only copy left is on the target. A copy is complete when its container is
//! there (LXD imports a container whole or not at all, and only after its home: the container's
//! disk device names the home volume, and LXD refuses to delete a volume a container uses); a
//! home volume without its container is what an interrupted copy leaves.

use crate::agent_client::AgentError;
use crate::error::ActionError;
use crate::placement::home_size::home_volume;

use super::transfer::Side;

/// Which of the two nodes of a move holds a complete copy of the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder {
    /// Only the source: a move that has not copied yet, or a copy that failed part-way.
    Source,
    /// Only the target: the move got past its copy before (the database is stale).
    Target,
    /// Both: a copy done but not committed, or not yet cleared from the source.
    Both,
    /// Neither: nothing may be deleted, and the move cannot go on without an admin.
    Neither,
}

/// Whether `side` holds a complete copy of container `name` (with its home when `home`).
/// An agent that cannot say is an error: nothing is deleted on a guess.
pub async fn complete(name: &str, home: bool, side: &Side<'_>) -> Result<bool, ActionError> {
    match side.agent.get_instance(name.to_string()).await {
        Ok(found) => Ok(!home
            || found
                .devices
                .values()
                .any(|d| d.get("source").map(String::as_str) == Some(&home_volume(name)))),
        Err(AgentError::Status { status: 404, .. }) => Ok(false),
        Err(e) => Err(ActionError::on_node(&side.node.name)(e)),
    }
}

/// Asks both agents which of them holds a complete copy of `name`.
pub async fn locate(
    name: &str,
    home: bool,
    from: &Side<'_>,
    to: &Side<'_>,
) -> Result<Holder, ActionError> {
    let (source, target) = tokio::try_join!(complete(name, home, from), complete(name, home, to))?;
    Ok(match (source, target) {
        (true, true) => Holder::Both,
        (true, false) => Holder::Source,
        (false, true) => Holder::Target,
        (false, false) => Holder::Neither,
    })
}
