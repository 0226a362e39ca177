//! Replacing a student's SSH access to a running container: the checked access, the user
//! provisioned again inside (`guest::ssh`), and the proxy endpoint.

use crate::lxd::instances::InstancePut;
use cohort_proto::agent::{Instance, SshAccess};

use super::{InstanceError, Instances, DEVICE_SSH, KEY_SSH_USER};

/// Checks and normalises SSH access on its own (for `PUT /ssh`).
pub fn check_access(ssh: &SshAccess) -> Result<SshAccess, InstanceError> {
    let probe = cohort_proto::agent::CreateInstance {
        idempotency_key: "ssh".into(),
        name: "probe".into(),
        source: cohort_proto::agent::InstanceSource::Image {
            alias: "probe".into(),
        },
        limits: cohort_proto::agent::Limits {
            cpu: 1,
            memory_mib: 64,
            disk_gib: 1,
        },
        gpus: Vec::new(),
        ssh: Some(ssh.clone()),
        home_volume: None,
        home_mib: None,
        home_snapshots: None,
        config: Default::default(),
        start: false,
        network_policy: None,
    };
    let plan = super::spec::plan(&probe, "probe")?;
    Ok(plan.ssh.expect("ssh was given"))
}
impl Instances {
    /// Replaces the user's keys/password/sudo and the proxy endpoint of a running instance.
    pub async fn set_ssh(&self, name: &str, ssh: &SshAccess) -> Result<Instance, InstanceError> {
        let ssh = check_access(ssh)?;
        let lx = self
            .lxd_instance(name)
            .await?
            .ok_or_else(|| InstanceError::NotFound {
                field: None,
                message: format!("instance {name} not found"),
            })?;
        if !lx.is_running() {
            return Err(InstanceError::Conflict(format!(
                "instance {name} is {}; start it before changing SSH access",
                lx.status
            )));
        }
        let mut ssh = ssh;
        // Through the kernel to the container's address where it has one on a bridge.
        let address = self
            .network
            .current
            .as_ref()
            .and_then(|n| n.forward_to(crate::network::nic_address(&lx.config, &lx.devices)));
        if let (Some(network), Some(_)) = (&self.network.current, address) {
            ssh.listen_address = network.listen_for(&ssh.listen_address);
        }
        self.provision_user(name, &ssh).await?;
        let device = crate::network::ssh_proxy_device(&ssh.listen_address, ssh.port, address);
        let patch = InstancePut {
            config: Some([(KEY_SSH_USER.into(), ssh.username.clone())].into()),
            devices: Some([(DEVICE_SSH.into(), device)].into()),
            ..Default::default()
        };
        self.lxd.patch_instance(name, &patch).await?;
        self.await_sshd(name, &ssh).await?;
        self.instance(name).await
    }
}
