//! The bytes of a move: a stopped container's backup and its home volume's, piped from the
//! source node's agent into the target node's, streamed (never whole in the controller's
//! memory), under a deadline for the whole and for any silence of the source; and the undoing
//! of a copy that did not finish, so the student keeps the container on the source (never the
//! deletion of the last copy: see [`super::copies`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_proto::agent::{StateAction, StateChange};
use futures_util::StreamExt;

use crate::agent_client::{AgentError, AgentFuture, AgentStream, NodeAgent};
use crate::db::models::node::Node;
use crate::error::ActionError;
use crate::placement::home_size::home_volume;

/// Longest one tarball may take to cross, and longest the source may send nothing.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(3600);
const SOURCE_IDLE: Duration = Duration::from_secs(120);
/// How long a running container is given to shut down cleanly before its export.
const STOP_TIMEOUT_S: u32 = 60;

/// One side of a move: a node and its agent.
pub struct Side<'a> {
    pub node: &'a Node,
    pub agent: &'a dyn NodeAgent,
}

/// `stream`, failing when nothing has come for `idle`, counting what passes into `bytes`.
fn watched(stream: AgentStream, idle: Duration, bytes: Arc<AtomicU64>) -> AgentStream {
    Box::pin(futures_util::stream::unfold(Some(stream), move |left| {
        let bytes = bytes.clone();
        async move {
            let mut stream = left?;
            match tokio::time::timeout(idle, stream.next()).await {
                Ok(Some(Ok(chunk))) => {
                    bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    Some((Ok(chunk), Some(stream)))
                }
                Ok(Some(Err(e))) => Some((Err(e), None)),
                Ok(None) => None,
                Err(_) => Some((
                    Err(AgentError::Unreachable(format!(
                        "the source node sent nothing for {idle:?}"
                    ))),
                    None,
                )),
            }
        }
    }))
}

/// Pipes what `export` streams into `import`; the bytes that crossed.
async fn pipe(
    what: &str,
    from: &Side<'_>,
    to: &Side<'_>,
    export: AgentFuture<AgentStream>,
    import: impl FnOnce(AgentStream) -> AgentFuture<()>,
) -> Result<u64, ActionError> {
    let started = Instant::now();
    let tarball = export
        .await
        .map_err(ActionError::on_node(&from.node.name))?;
    let bytes = Arc::new(AtomicU64::new(0));
    let tarball = watched(tarball, SOURCE_IDLE, bytes.clone());
    tokio::time::timeout(TRANSFER_TIMEOUT, import(tarball))
        .await
        .map_err(|_| {
            ActionError::Internal(format!("moving {what} took over {TRANSFER_TIMEOUT:?}"))
        })?
        .map_err(ActionError::on_node(&to.node.name))?;
    let bytes = bytes.load(Ordering::Relaxed);
    tracing::info!(what, from = %from.node.name, to = %to.node.name, bytes,
                   seconds = started.elapsed().as_secs_f64(), "backup moved");
    Ok(bytes)
}

/// Stops the container on `from` and copies it, and its home when it has one, to `to`, where
/// anything an earlier try left is deleted first: `to` is not the instance's node yet, so
/// nothing there is the student's. Nothing on `from` is changed but the stop.
pub async fn copy(
    name: &str,
    home: bool,
    from: &Side<'_>,
    to: &Side<'_>,
) -> Result<u64, ActionError> {
    let stop = StateChange {
        action: StateAction::Stop,
        timeout_s: Some(STOP_TIMEOUT_S),
        force: false,
    };
    from.agent
        .change_state(name.to_string(), stop)
        .await
        .map_err(ActionError::on_node(&from.node.name))?;
    remove_copies(name, home, to).await?;
    let mut bytes = 0;
    if home {
        // The home first: the container's disk device names it, and LXD looks for it.
        let volume = home_volume(name);
        bytes += pipe(
            &volume,
            from,
            to,
            from.agent.export_volume(volume.clone()),
            |tarball| to.agent.import_volume(volume.clone(), tarball),
        )
        .await?;
    }
    bytes += pipe(
        name,
        from,
        to,
        from.agent.export_instance(name.to_string()),
        |tarball| to.agent.import_instance(name.to_string(), tarball),
    )
    .await?;
    Ok(bytes)
}

/// Deletes the container and its home on `side` (absent is fine).
pub async fn remove_copies(name: &str, home: bool, side: &Side<'_>) -> Result<(), ActionError> {
    side.agent
        .delete_instance(name.to_string())
        .await
        .map_err(ActionError::on_node(&side.node.name))?;
    if home {
        side.agent
            .delete_volume(home_volume(name))
            .await
            .map_err(ActionError::on_node(&side.node.name))?;
    }
    Ok(())
}

/// After a copy that failed or was refused: what reached `to` goes, and the container on `from`
/// (untouched but for the stop) runs again when it ran before. `to`'s copy goes only while
/// `from` still holds a complete one, asked of its agent then (a second run of the move may have
/// finished and cleared `from` meanwhile): the last copy is never deleted. Failures are logged:
/// the step's own error is what the operation reports, and a retry undoes again.
pub async fn undo(name: &str, home: bool, running: bool, from: &Side<'_>, to: &Side<'_>) {
    match super::copies::complete(name, home, from).await {
        Ok(true) => {
            if let Err(e) = remove_copies(name, home, to).await {
                tracing::warn!(instance = name, node = %to.node.name, error = %e, "cannot remove a failed move's copy");
            }
        }
        Ok(false) => {
            tracing::warn!(instance = name, source = %from.node.name, target = %to.node.name,
                           "the source holds no complete copy any more; the target's is kept");
            return;
        }
        Err(e) => {
            tracing::warn!(instance = name, node = %from.node.name, error = %e,
                           "cannot tell whether the source still holds its copy; the target's is kept");
            return;
        }
    }
    if running {
        let start = StateChange {
            action: StateAction::Start,
            timeout_s: None,
            force: false,
        };
        if let Err(e) = from.agent.change_state(name.to_string(), start).await {
            tracing::warn!(instance = name, node = %from.node.name, error = %e, "cannot start a container again after a failed move");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_source_that_falls_silent_ends_the_stream_with_an_error() {
        let chunks = futures_util::stream::iter([Ok(bytes::Bytes::from_static(b"abc"))])
            .chain(futures_util::stream::pending());
        let bytes = Arc::new(AtomicU64::new(0));
        let mut piped = watched(Box::pin(chunks), Duration::from_millis(50), bytes.clone());
        let first = piped.next().await.unwrap().unwrap();
        assert_eq!(&first[..], b"abc");
        let silent = piped.next().await.expect("an item, not the end");
        assert!(
            matches!(&silent, Err(AgentError::Unreachable(m)) if m.contains("sent nothing")),
            "{silent:?}"
        );
        assert!(piped.next().await.is_none(), "nothing after the error");
        assert_eq!(bytes.load(Ordering::Relaxed), 3);
    }
}
