//! Waiting for an operation in front of a person: an indicatif bar counting the operation's items
//! (students of a course, instances of a node), silent with `--quiet`; failures named at the end.

use std::time::Duration;

use anyhow::bail;
use cohort_proto::api::operations::{Operation, OperationStatus};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::client::Client;

/// Waits for `operation`; an error when it did not succeed, naming every failed item.
pub async fn wait(
    client: &Client,
    operation: &Operation,
    quiet: bool,
) -> anyhow::Result<Operation> {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} ({elapsed})")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    };
    let done = client
        .wait(operation, |op| {
            bar.set_length(u64::from(op.progress.total.max(1)));
            bar.set_position(u64::from(op.progress.done + op.progress.failed));
            bar.set_message(format!("{} {}", kind(op), op.target));
        })
        .await;
    bar.finish_and_clear();
    let done = done?;
    check(&done)?;
    Ok(done)
}

/// Prefix of the reason the controller gives a queued instance (and its items).
const QUEUED: &str = "queued:";

/// Exit status of `course provision --wait` when every student's container runs or waits in the
/// queue and at least one waits (1 stays lxc's "Error:").
pub const SOME_QUEUED: i32 = 2;

/// The items still waiting in the queue, with the controller's reason.
fn queued(op: &Operation) -> Vec<(String, String)> {
    op.items
        .iter()
        .filter(|i| !i.status.is_final())
        .filter_map(|i| {
            let why = i.error.as_deref().filter(|e| e.starts_with(QUEUED))?;
            Some((i.target.clone(), why.to_string()))
        })
        .collect()
}

/// Whether waiting can stop: the operation ended, or every item not done waits in the queue.
/// An operation whose items are all done (or that has none: a provision with nothing to do) is
/// not settled until the worker ends it, so its outcome is the answer.
fn settled(op: &Operation) -> bool {
    if op.status.is_final() {
        return true;
    }
    let waiting = queued(op).len();
    waiting > 0 && op.items.iter().filter(|i| !i.status.is_final()).count() == waiting
}

/// Waits until every item of a provision is done or waits in the queue (with its reason), as a
/// class only part of which fits would otherwise keep the caller waiting for capacity. Returns
/// [`SOME_QUEUED`] with the queued students and their reasons on stderr, 0 when all are done;
/// an error naming every failed item.
pub async fn wait_placed(client: &Client, operation: &Operation) -> anyhow::Result<i32> {
    let mut current = operation.clone();
    while !settled(&current) {
        current = client
            .get(&format!("/operations/{}/wait?timeout=5", current.id))
            .await?;
    }
    if current.status.is_final() {
        check(&current)?;
        return Ok(0);
    }
    let failed: Vec<_> = current
        .items
        .iter()
        .filter(|i| i.status == OperationStatus::Failure)
        .collect();
    if !failed.is_empty() {
        let mut lines = vec![format!(
            "{} of {} items failed",
            failed.len(),
            current.items.len()
        )];
        for item in failed {
            let why = item.error.as_deref().unwrap_or("failed");
            lines.push(format!("  {}: {why}", item.target));
        }
        bail!("{}", lines.join("\n"));
    }
    let waiting = queued(&current);
    // Said even with --quiet: it is the answer, not progress.
    eprintln!(
        "{} of {} containers are queued:",
        waiting.len(),
        current.items.len()
    );
    for (target, why) in &waiting {
        eprintln!("  {target}: {why}");
    }
    Ok(SOME_QUEUED)
}

/// The operation's kind as its JSON spells it (`create_instance`, `provision_course`, ...).
pub fn kind(op: &Operation) -> String {
    crate::render::wire_name(op.kind)
}

/// An error unless the operation succeeded: its own error and each failed item's.
pub fn check(op: &Operation) -> anyhow::Result<()> {
    if op.status == OperationStatus::Success {
        return Ok(());
    }
    let mut lines = vec![op.error.clone().unwrap_or_else(|| {
        let status = crate::render::wire_name(op.status);
        format!("Operation {} ended: {status}", op.id)
    })];
    for item in &op.items {
        if item.status == OperationStatus::Failure {
            let why = item.error.as_deref().unwrap_or("failed");
            lines.push(format!("  {}: {why}", item.target));
        }
    }
    bail!("{}", lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cohort_proto::api::operations::OperationItem;

    fn operation(status: &str, items: &[(&str, Option<&str>)]) -> Operation {
        let items: Vec<OperationItem> = items
            .iter()
            .map(|(status, error)| {
                serde_json::from_value(serde_json::json!({
                    "id": "00000000-0000-0000-0000-000000000000", "target": "t", "node": null, "ssh_port": null,
                    "status": status, "attempts": 0, "error": error,
                }))
                .unwrap()
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "id": "00000000-0000-0000-0000-000000000000", "kind": "provision_course", "status": status,
            "created_by": "admin", "target": "c",
            "progress": {"total": items.len(), "done": 0, "failed": 0},
            "items": items, "error": null,
            "created_at": "2026-11-24T00:00:00Z", "updated_at": "2026-11-24T00:00:00Z",
        }))
        .unwrap()
    }

    #[test]
    fn a_provision_waits_for_its_end_unless_everything_left_is_queued() {
        // Nothing to do (a second run): settled only once the worker ends it, never "0 queued".
        assert!(!settled(&operation("running", &[])));
        assert!(settled(&operation("success", &[])));
        // All done but not yet ended: wait for the outcome.
        assert!(!settled(&operation("running", &[("success", None)])));
        // One running, one queued: wait; only queued ones left: settled.
        let queued = Some("queued: needs 1 GPU");
        assert!(!settled(&operation(
            "running",
            &[("running", None), ("pending", queued)]
        )));
        assert!(settled(&operation(
            "running",
            &[("success", None), ("pending", queued)]
        )));
    }
}
