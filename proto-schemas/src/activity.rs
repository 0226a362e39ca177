//! What a container is doing, as its node sees it (`GET /v1/instances/{name}/activity`): the
//! reclaimer asks before it stops a container for idleness (issue 43). Times are ages in
//! seconds, counted on the node's clock (the container's clock is the node's), so the
//! controller can place them on the database's clock without trusting the node's.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The CPU threshold when the controller names none, in percent of one core.
pub const DEFAULT_CPU_PERCENT: u32 = 10;

/// The busiest process CPU threshold the agent accepts, in percent of one core.
pub const MAX_CPU_PERCENT: u32 = 10_000;

/// What the container is doing now.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstanceActivity {
    /// Seconds since the last input on any of the container's terminals (its `/dev/pts/N`
    /// devices' access times, as `w` reads them: SSH sessions and JupyterLab's terminals);
    /// `None` when it has none.
    pub tty_input_age_s: Option<u64>,
    /// Processes above the CPU threshold asked for, over the agent's short sample.
    pub busy_processes: Vec<BusyProcess>,
    /// JupyterLab's own account of its kernels and terminals; `None` when nothing answers on
    /// the container's JupyterLab port.
    pub jupyter: Option<JupyterActivity>,
    /// JupyterLab took the connection but did not answer within the agent's wait (a loaded
    /// node): its kernels' use is unknown, and the reclaimer does not count it as none.
    #[serde(default)]
    pub jupyter_unanswered: bool,
}

/// A process of the container above the CPU threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BusyProcess {
    /// Its PID on the node.
    pub pid: u32,
    /// Its command name (`comm`).
    pub command: String,
    /// Percent of one core over the sample.
    pub cpu_percent: u32,
}

/// What JupyterLab's API (`api/kernels`, `api/terminals`) says; its own polling by an open
/// tab changes none of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JupyterActivity {
    /// Kernels whose `execution_state` is `busy`.
    pub kernels_executing: u32,
    /// Seconds since the most recent kernel `last_activity`.
    pub kernel_activity_age_s: Option<u64>,
    /// Seconds since the most recent terminal `last_activity`.
    pub terminal_activity_age_s: Option<u64>,
}
