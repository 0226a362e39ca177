//! What became of one step, as the worker records it.

use std::time::Duration;

use crate::error::ActionError;

/// What became of one step.
#[derive(Debug)]
pub enum StepOutcome {
    Done,
    /// Nothing to do any more (the instance went away).
    Cancelled(String),
    /// Permanent failure: retrying cannot help.
    Failed(String),
    /// A transient failure: retry later with backoff.
    Retry(String),
    /// Not runnable yet (the instance waits in the queue); look again after the delay.
    Wait(Duration),
}

impl StepOutcome {
    pub fn label(&self) -> &'static str {
        match self {
            StepOutcome::Done => "done",
            StepOutcome::Cancelled(_) => "cancelled",
            StepOutcome::Failed(_) => "failed",
            StepOutcome::Retry(_) => "retry",
            StepOutcome::Wait(_) => "wait",
        }
    }
}

impl From<ActionError> for StepOutcome {
    fn from(e: ActionError) -> Self {
        match &e {
            ActionError::Agent { source, .. } if source.is_permanent() => {
                StepOutcome::Failed(e.to_string())
            }
            _ => StepOutcome::Retry(e.to_string()),
        }
    }
}
