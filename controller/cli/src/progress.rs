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
