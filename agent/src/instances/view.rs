//! LXD's instance object read back into the agent API's `Instance`: limits, GPUs and the SSH
//! endpoint come from the config and devices the agent wrote; `get` is one call
//! (`recursion=1`, state included) and `list` is one call (`recursion=2`).

use std::time::Duration;

use cohort_proto::agent::{GpuAttachment, Instance, InstanceState, Limits};
use futures_util::future::join_all;

use super::spec::parse_size_mib;
use super::Instances;
use super::{InstanceError, DEVICE_SSH, KEY_GPUS, KEY_IDEMPOTENCY, KEY_SSH_HOST_KEY};

/// How long a read waits for an sshd banner before calling the instance not ready.
const READY_PROBE: Duration = Duration::from_millis(400);

pub(crate) use crate::lxd::instances::Instance as LxdInstance;
use crate::lxd::instances::Usage;

impl LxdInstance {
    /// `(listen address, port)` of the agent's SSH proxy device.
    pub fn ssh_endpoint(&self) -> Option<(String, u16)> {
        let listen = self.devices.get(DEVICE_SSH)?.get("listen")?;
        let rest = listen.strip_prefix("tcp:")?;
        let (addr, port) = rest.rsplit_once(':')?;
        Some((
            addr.trim_matches(['[', ']']).to_string(),
            port.parse().ok()?,
        ))
    }

    pub fn is_running(&self) -> bool {
        self.status == "Running"
    }

    fn limits(&self) -> Option<Limits> {
        Some(Limits {
            cpu: self.config.get("limits.cpu")?.parse().ok()?,
            memory_mib: parse_size_mib(self.config.get("limits.memory")?)?,
            disk_gib: parse_size_mib(self.devices.get("root")?.get("size")?)? / 1024,
        })
    }

    pub fn into_instance(self, ssh_ready: bool) -> Instance {
        let limits = self.limits();
        let ssh = self.ssh_endpoint();
        let gpus: Vec<GpuAttachment> = self
            .config
            .get(KEY_GPUS)
            .and_then(|g| serde_json::from_str(g).ok())
            .unwrap_or_default();
        let state = self.state.map(|s| InstanceState {
            processes: s.processes,
            cpu_usage_ns: s.cpu.map_or(0, |c| c.known()),
            memory_bytes: s.memory.map_or(0, |m| m.known()),
            disk_bytes: s
                .disk
                .and_then(|d| d.get("root").map(Usage::known))
                .unwrap_or(0),
        });
        Instance {
            name: self.name,
            status: self.status,
            idempotency_key: self.config.get(KEY_IDEMPOTENCY).cloned(),
            limits,
            gpus,
            ssh_port: ssh.as_ref().map(|s| s.1),
            ssh_listen: ssh.map(|s| s.0),
            address: crate::network::nic_address(&self.config, &self.devices)
                .map(|a| a.to_string()),
            ssh_host_key: self.config.get(KEY_SSH_HOST_KEY).cloned(),
            created_at: self.created_at,
            ssh_ready,
            state,
            config: self.config,
            devices: self.devices,
        }
    }
}

impl Instances {
    /// The raw LXD instance without its state (`state` is `None`), or `None` when it does not
    /// exist: what every step of the agent reads before it acts.
    pub(crate) async fn lxd_instance(
        &self,
        name: &str,
    ) -> Result<Option<LxdInstance>, InstanceError> {
        super::check_name(name)?;
        match self.lxd.get_instance_config(name).await {
            Ok(i) => Ok(Some(i)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn ready_now(&self, lx: &LxdInstance) -> bool {
        match lx.ssh_endpoint() {
            Some((addr, port)) if lx.is_running() => {
                crate::guest::ssh::sshd_answers(&addr, port, READY_PROBE).await
            }
            _ => false,
        }
    }

    /// The instance as the API shows it, with its state.
    pub async fn instance(&self, name: &str) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        let lx = match self.lxd.get_instance(name).await {
            Ok(lx) => lx,
            Err(e) if e.is_not_found() => return Err(not_found(name, self.lxd.project())),
            Err(e) => return Err(e.into()),
        };
        let ready = self.ready_now(&lx).await;
        Ok(lx.into_instance(ready))
    }

    /// LXD's own state object of one instance (`lxc list`'s addresses and usage through the
    /// controller's LXD-style API): read, never changed.
    pub async fn lxd_state(&self, name: &str) -> Result<serde_json::Value, InstanceError> {
        self.lxd_instance(name)
            .await?
            .ok_or_else(|| not_found(name, self.lxd.project()))?;
        Ok(self.lxd.get_instance_state_raw(name).await?)
    }

    /// LXD's state objects of every instance of the project, by name, in one LXD call.
    pub async fn lxd_states(
        &self,
    ) -> Result<std::collections::BTreeMap<String, serde_json::Value>, InstanceError> {
        Ok(self.lxd.get_instance_states_raw().await?)
    }

    /// The console log LXD keeps of a container (`lxc console --show-log`).
    pub async fn console_log(&self, name: &str) -> Result<bytes::Bytes, InstanceError> {
        self.lxd_instance(name)
            .await?
            .ok_or_else(|| not_found(name, self.lxd.project()))?;
        Ok(self.lxd.get_console_log(name).await?)
    }

    /// Every instance of the project without its state and without asking each one's sshd
    /// (`ssh_ready` is false: not probed), in one LXD call: the controller's poll, which reads
    /// names, statuses, devices and GPUs. At 300 containers the full listing would cost the
    /// daemon about 2.3 s of CPU (7.8 ms a state) and 300 sshd forks each poll; on a loaded node
    /// the polls ran past their 10 s and the node went offline.
    pub async fn instances_brief(&self) -> Result<Vec<Instance>, InstanceError> {
        let all = self.lxd.get_instances_brief().await?;
        Ok(all.into_iter().map(|lx| lx.into_instance(false)).collect())
    }

    /// Every instance of the project, with state, in one LXD call.
    pub async fn instances(&self) -> Result<Vec<Instance>, InstanceError> {
        let all = self.lxd.get_instances().await?;
        let ready = join_all(all.iter().map(|lx| self.ready_now(lx))).await;
        Ok(all
            .into_iter()
            .zip(ready)
            .map(|(lx, r)| lx.into_instance(r))
            .collect())
    }
}

fn not_found(name: &str, project: &str) -> InstanceError {
    InstanceError::NotFound {
        field: None,
        message: format!("instance {name} not found in LXD project {project}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_lxd_could_not_read_counts_as_unknown_and_the_rest_is_kept() {
        let lx: LxdInstance = serde_json::from_value(serde_json::json!({
            "name": "s1",
            "status": "Running",
            "config": {"limits.cpu": "2", "limits.memory": "4096MiB"},
            "devices": {"root": {"type": "disk", "path": "/", "pool": "p", "size": "20GiB"}},
            "state": {
                "processes": 12,
                "cpu": {"usage": -1},
                "memory": {"usage": 52_428_800, "usage_peak": -1},
                "disk": {"root": {"usage": -1}}
            }
        }))
        .expect("LXD's -1 is read, not refused");
        let state = lx.into_instance(true).state.expect("state");
        assert_eq!(
            state,
            InstanceState {
                processes: 12,
                cpu_usage_ns: 0,
                memory_bytes: 52_428_800,
                disk_bytes: 0,
            }
        );
    }
}
