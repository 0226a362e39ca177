//! `cohort init`: create an instance from an image without starting it (lxc's `init`).

use clap::Args;

#[derive(Debug, Args)]
pub struct Init {
    /// Image alias or fingerprint: [<remote>:]<image>
    pub image: String,
    /// Instance name: [<remote>:][<name>] (the controller picks one when omitted)
    pub name: Option<String>,
    /// Config key/value to apply to the new instance (limits.cpu, limits.memory, user.*)
    #[arg(short, long = "config", value_name = "KEY=VALUE")]
    pub config: Vec<String>,
    /// New key/value to apply to a specific device (only root,size=SIZE)
    #[arg(short, long = "device", value_name = "DEVICE,KEY=VALUE")]
    pub device: Vec<String>,
    /// Cluster member name (the node)
    #[arg(long)]
    pub target: Option<String>,
    /// Number of GPUs (Cohort)
    #[arg(long, default_value_t = 0)]
    pub gpus: u32,
    /// GPU model to ask for, e.g. "A100" (Cohort)
    #[arg(long)]
    pub gpu_model: Option<String>,
    /// User who owns the instance (admins and instructors; Cohort)
    #[arg(long)]
    pub owner: Option<String>,
}
