//! The GPU service: the inventory with each compute process attributed to its instance, which
//! takes this project's instance names from LXD. NVML is read on its own thread with a deadline
//! ([`super::reader`]).

use std::path::PathBuf;

use cohort_proto::agent::GpuInventory;

use super::reader::{NvmlReader, DEADLINE};
use crate::lxd::{Lxd, LxdError};

pub struct Gpus {
    lxd: Lxd,
    nvml: NvmlReader,
    project: String,
}

impl Gpus {
    /// `nvml`: the NVML library (`None`: the system's).
    pub fn new(lxd: Lxd, nvml: Option<PathBuf>, project: String) -> Self {
        Gpus {
            lxd,
            nvml: NvmlReader::start(nvml, DEADLINE),
            project,
        }
    }

    /// The GPU inventory with each compute process attributed to its instance.
    pub async fn inventory(&self) -> Result<GpuInventory, LxdError> {
        let names = self.lxd.get_instance_names().await?;
        let mut gpus = self.nvml.read().await;
        let project = self.project.clone();
        // Attribution reads /proc only: it cannot hang on the driver.
        Ok(tokio::task::spawn_blocking(move || {
            super::attribute(&mut gpus, &project, &names);
            gpus
        })
        .await
        .expect("GPU attribution does not panic"))
    }
}
