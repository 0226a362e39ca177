//! `cohort launch`: create and start an instance (lxc's `launch`, the `init` flags plus waiting).

use clap::Args;

use super::init::Init;
use super::WaitFlags;

#[derive(Debug, Args)]
pub struct Launch {
    #[command(flatten)]
    pub create: Init,
    #[command(flatten)]
    pub wait: WaitFlags,
}
