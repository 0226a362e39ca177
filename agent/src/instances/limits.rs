//! New cores and memory for an instance already made (its course's limits changed): one
//! `PATCH` of `limits.cpu` and `limits.memory`, which LXD applies to a running container's
//! cgroup at once and keeps for its next start. The root disk is left as it was made.

use crate::lxd::instances::InstancePut;
use cohort_proto::agent::{Instance, LiveLimits};

use super::spec::check_cores_memory;
use super::InstanceError;
use super::Instances;

impl Instances {
    /// `PUT /v1/instances/{name}/limits`.
    pub async fn set_limits(
        &self,
        name: &str,
        req: &LiveLimits,
    ) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        check_cores_memory("", req.cpu, req.memory_mib)?;
        let patch = InstancePut::config(
            [
                ("limits.cpu".into(), req.cpu.to_string()),
                ("limits.memory".into(), format!("{}MiB", req.memory_mib)),
            ]
            .into(),
        );
        match self.lxd.patch_instance(name, &patch).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => return Err(InstanceError::instance_missing(name, &e)),
            Err(e) => return Err(e.into()),
        }
        tracing::info!(instance = %name, cpu = req.cpu, memory_mib = req.memory_mib, "limits set");
        self.instance(name).await
    }
}
