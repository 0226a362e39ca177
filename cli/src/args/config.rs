//! `cohort config show|get|set|unset|edit` and `cohort config device add|remove|list|show`: an
//! instance's configuration and devices (lxc's `config`), changed live through the controller.

use clap::{Args, Subcommand};

use super::TableFormat;

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
    Unset(ConfigUnset),
    /// Edit instance configurations as YAML ($EDITOR; read from stdin when it is not a terminal)
    Edit(ConfigEdit),
    /// Manage devices
    Device(Device),
    /// Manage the certificates the real `lxc` client and pylxd are trusted with
    Trust(Trust),
}

#[derive(Debug, Args)]
pub struct ConfigShow {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Show the expanded configuration (the same here: Cohort uses no profiles)
    #[arg(short, long)]
    pub expanded: bool,
}

#[derive(Debug, Args)]
pub struct ConfigGet {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Configuration key
    pub key: String,
    /// Access the expanded configuration (the same here)
    #[arg(short, long)]
    pub expanded: bool,
}

#[derive(Debug, Args)]
pub struct ConfigSet {
    /// [<remote>:]<instance>
    pub instance: String,
    /// <key>=<value>... (or the older <key> <value>)
    #[arg(required = true)]
    pub pairs: Vec<String>,
}

#[derive(Debug, Args)]
pub struct ConfigUnset {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Configuration key
    pub key: String,
}

#[derive(Debug, Args)]
pub struct ConfigEdit {
    /// [<remote>:]<instance>
    pub instance: String,
}

#[derive(Debug, Args)]
pub struct Device {
    #[command(subcommand)]
    pub command: DeviceCommand,
}

#[derive(Debug, Subcommand)]
pub enum DeviceCommand {
    /// Add instance devices (admin; disk or proxy)
    Add(DeviceAdd),
    /// Remove instance devices (admin)
    #[command(visible_alias = "rm")]
    Remove(DeviceRemove),
    /// List instance devices
    #[command(visible_alias = "ls")]
    List(DeviceList),
    /// Show full device configuration
    Show(DeviceList),
}

#[derive(Debug, Args)]
pub struct DeviceAdd {
    /// [<remote>:]<instance>
    pub instance: String,
    /// Device name
    pub device: String,
    /// Device type (disk or proxy)
    #[arg(name = "type")]
    pub kind: String,
    /// <key>=<value>...
    pub pairs: Vec<String>,
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

#[derive(Debug, Args)]
pub struct Trust {
    #[command(subcommand)]
    pub command: TrustCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrustCommand {
    /// Make a token that `lxc remote add <remote> <token>` accepts once
    Add(TrustAdd),
    /// List trusted lxc certificates and pending tokens
    #[command(visible_alias = "ls")]
    List(TrustList),
    /// Untrust lxc certificates (by name or fingerprint) and pending tokens
    #[command(visible_alias = "rm")]
    Remove(TrustRemove),
}

#[derive(Debug, Args)]
pub struct TrustAdd {
    /// [<remote>:]<name>: the client's name
    pub name: String,
    /// The Cohort user the certificate acts as (default: you; others need the admin role)
    #[arg(long)]
    pub user: Option<String>,
}

#[derive(Debug, Args)]
pub struct TrustList {
    /// [<remote>:]
    pub remote: Option<String>,
    /// Format (csv|json|table|yaml|compact)
    #[arg(short, long, value_enum, default_value = "table")]
    pub format: TableFormat,
}

#[derive(Debug, Args)]
pub struct TrustRemove {
    /// [<remote>:]<name or fingerprint>
    pub name: String,
}
