//! The GPU service: the inventory with each compute process attributed to its instance, which
//! takes this project's instance names from LXD.

use std::path::PathBuf;

use cohort_proto::agent::GpuInventory;

use crate::lxd::{Lxd, LxdError};

pub struct Gpus {
    lxd: Lxd,
    /// The NVML library (`None`: the system's).
    nvml: Option<PathBuf>,
    project: String,
}

impl Gpus {
    pub fn new(lxd: Lxd, nvml: Option<PathBuf>, project: String) -> Self {
        Gpus { lxd, nvml, project }
    }

    /// The GPU inventory with each compute process attributed to its instance.
    pub async fn inventory(&self) -> Result<GpuInventory, LxdError> {
        let names = self.lxd.get_instance_names().await?;
        let nvml = self.nvml.clone();
        let project = self.project.clone();
        Ok(tokio::task::spawn_blocking(move || {
            let mut gpus = super::inventory(nvml.as_deref());
            super::attribute(&mut gpus, &project, &names);
            gpus
        })
        .await
        .expect("GPU inventory does not panic"))
    }
}
