//! `cohort image list|import|delete|alias list|alias rename|distribute`: the fleet's template
//! images (lxc's `image`; `distribute` is Cohort's own). Each image has exactly one alias, so
//! no `alias create|delete`; an admin renames it (how a published image is promoted).

use clap::{Args, Subcommand};

use super::{TableFormat, WaitFlags};

#[derive(Debug, Args)]
pub struct Image {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// List images
    #[command(visible_alias = "ls")]
    List(ImageList),
    /// Import images into the image store
    Import(ImageImport),
    /// Delete images
    #[command(visible_alias = "rm")]
    Delete(ImageDelete),
    /// Manage image aliases
    Alias(Alias),
    /// Have every online node fetch an image now, ahead of a class (Cohort)
    Distribute(ImageDistribute),
}

#[derive(Debug, Args)]
pub struct ImageDistribute {
    /// [<remote>:]<image> (alias or fingerprint)
    pub image: String,
    #[command(flatten)]
    pub wait: WaitFlags,
}

#[derive(Debug, Args)]
pub struct ImageList {
    /// [<remote>:] and filters (alias or fingerprint prefix)
    pub filters: Vec<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct ImageImport {
    /// <tarball> (a unified LXD image tarball) [<remote>:]
    #[arg(required = true, num_args = 1..=2)]
    pub args: Vec<String>,
    /// New aliases to add to the image
    #[arg(long, required = true)]
    pub alias: String,
    /// Description of the image
    #[arg(long)]
    pub description: Option<String>,
    /// Mark the image as ready for GPU containers (NVIDIA userspace inside) (Cohort)
    #[arg(long)]
    pub gpu_ready: bool,
    /// Mark the image as running JupyterLab for its student (images/jupyter): the portal offers
    /// "Open JupyterLab" for its containers (Cohort)
    #[arg(long)]
    pub jupyter: bool,
}

#[derive(Debug, Args)]
pub struct ImageDelete {
    /// [<remote>:]<image>...
    #[arg(required = true)]
    pub images: Vec<String>,
}

#[derive(Debug, Args)]
pub struct Alias {
    #[command(subcommand)]
    pub command: AliasCommand,
}

#[derive(Debug, Subcommand)]
pub enum AliasCommand {
    /// List image aliases (each Cohort image has exactly one alias, set at import)
    #[command(visible_alias = "ls")]
    List(AliasList),
    /// Rename an image's alias (admin): how an image an instructor published under their own
    /// name is promoted into the shared names
    #[command(visible_alias = "mv")]
    Rename(AliasRename),
}

#[derive(Debug, Args)]
pub struct AliasRename {
    /// [<remote>:]<old alias>
    pub old: String,
    /// <new alias>
    pub new: String,
}

#[derive(Debug, Args)]
pub struct AliasList {
    /// [<remote>:] and filters
    pub filters: Vec<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}
