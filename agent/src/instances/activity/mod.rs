//! What a container is doing, asked of the container itself rather than inferred from traffic
//! (issue 43): its terminals' last input ([`tty`]), its processes above a CPU threshold
//! ([`cpu`]) and JupyterLab's own account of its kernels and terminals ([`jupyter`]). The
//! controller's reclaimer asks before it stops a container for idleness, so a student typing
//! over SSH, compiling, or running a cell keeps their container, and an open JupyterLab tab's
//! background polling does not.

pub mod cpu;
pub mod jupyter;
pub mod tty;

use std::path::PathBuf;

use cohort_proto::activity::{InstanceActivity, MAX_CPU_PERCENT};

use super::service::Instances;
use super::InstanceError;

impl Instances {
    /// `GET /v1/instances/{name}/activity?cpu_percent=N`: the running container's activity
    /// now; its processes count as busy at `cpu_percent` percent of one core or more.
    pub async fn activity(
        &self,
        name: &str,
        cpu_percent: u32,
    ) -> Result<InstanceActivity, InstanceError> {
        if cpu_percent == 0 || cpu_percent > MAX_CPU_PERCENT {
            return Err(InstanceError::Invalid {
                field: "cpu_percent".into(),
                message: format!("must be 1 to {MAX_CPU_PERCENT} (percent of one core)"),
            });
        }
        let lx = self.lxd.get_instance(name).await?;
        let pid = lx.state.as_ref().map_or(0, |s| s.pid);
        if lx.status != "Running" || pid <= 0 {
            return Err(InstanceError::Conflict(format!(
                "{name} is {}: only a running container has activity",
                lx.status
            )));
        }
        let init = PathBuf::from(format!("/proc/{pid}"));
        // One LXD call: a loaded daemon answers slowly, and the reclaimer waits for the whole.
        let address = crate::network::nic_address(&lx.config, &lx.devices);
        let ttys = {
            let init = init.clone();
            tokio::task::spawn_blocking(move || tty::last_input_age(&init))
        };
        let busy = cpu::busy_processes(init, cpu_percent);
        let jupyter = async {
            match address {
                Some(a) => jupyter::activity(a, name).await,
                None => jupyter::Heard::Absent,
            }
        };
        let (ttys, busy_processes, jupyter) = tokio::join!(ttys, busy, jupyter);
        let (jupyter, jupyter_unanswered) = match jupyter {
            jupyter::Heard::Said(j) => (Some(j), false),
            jupyter::Heard::Absent => (None, false),
            jupyter::Heard::Unanswered => (None, true),
        };
        Ok(InstanceActivity {
            tty_input_age_s: ttys.map_err(|e| InstanceError::Internal(e.to_string()))?,
            busy_processes,
            jupyter,
            jupyter_unanswered,
        })
    }
}
