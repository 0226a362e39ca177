//! `cohort config`: instance configuration and devices (lxc's `config` and `config device`).

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct Config {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Show instance configurations (YAML)
    Show(ConfigShow),
    /// Get values for instance configuration keys
    Get(ConfigGet),
    /// Set instance configuration keys
    Set(ConfigSet),
    /// Unset instance configuration keys
    Unset(ConfigGet),
    /// Manage devices
    Device(Device),
}

#[derive(Debug, Args)]
pub struct ConfigShow {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Show the expanded configuration
    #[arg(short, long)]
    pub expanded: bool,
}

#[derive(Debug, Args)]
pub struct ConfigGet {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Configuration key
    pub key: String,
}

#[derive(Debug, Args)]
pub struct ConfigSet {
    /// [<remote>:]<instance>
    pub instance: String,
    /// <key>=<value>... (or <key> <value>)
    #[arg(required = true)]
    pub pairs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct Device {
    #[command(subcommand)]
    pub command: DeviceCommand,
}

#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Add instance devices
    Add(DeviceAdd),
    /// Remove instance devices
    #[command(visible_alias = "rm")]
    Remove(DeviceRemove),
    /// List instance devices
    #[command(visible_alias = "ls")]
    List(DeviceList),
}

#[derive(Debug, Args)]
pub struct DeviceAdd {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Device name
    pub device: String,
    /// Device type (disk, gpu, proxy, ...)
    #[arg(value_name = "TYPE")]
    pub kind: String,
    /// key=value...
    pub options: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DeviceRemove {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Device names
    #[arg(required = true)]
    pub devices: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DeviceList {
    /// [<remote>:]<instance>
    pub instance: String,
}
