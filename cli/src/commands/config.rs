//! `cohort config`: show and get read the instance as the controller knows it (the keys it passed
//! plus `limits.cpu`/`limits.memory`, which the agent sets from the limits) with its devices as
//! its node's daemon holds them (GPU, home volume, NIC, SSH proxy), in lxc's YAML; set,
//! unset, edit and the device verbs change the live instance with `PATCH /instances/{name}`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};

use anyhow::{bail, Context};
use cohort_proto::api::instances::{Instance, LiveConfig, UpdateInstance};
use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::Session;
use crate::args::config::{Config, ConfigCommand, DeviceCommand};
use crate::client::{seg, Client};
use crate::render;

/// `lxc config show`'s document, with the fields Cohort can state truthfully.
#[derive(Debug, Serialize)]
pub struct Shown {
    pub config: BTreeMap<String, String>,
    /// As the node's daemon holds them; none while the container is queued (it is nowhere yet).
    pub devices: BTreeMap<String, BTreeMap<String, String>>,
    /// Cohort makes persistent containers only.
    pub ephemeral: bool,
    /// Snapshots are never stateful.
    pub stateful: bool,
}

/// What `config edit` reads back: the config map; the other fields cannot change.
#[derive(Debug, Deserialize)]
struct Edited {
    #[serde(default)]
    config: BTreeMap<String, String>,
}

pub async fn run(session: &Session, args: Config) -> anyhow::Result<()> {
    match args.command {
        ConfigCommand::Show(show) => {
            let instance = fetch(session, &show.instance).await?;
            let mut doc = shown(&instance);
            if instance.node.is_some() {
                doc.devices = live(session, &show.instance).await?.devices;
            }
            print!("{}", render::yaml(&doc)?);
        }
        ConfigCommand::Get(get) => {
            let instance = fetch(session, &get.instance).await?;
            // lxc prints an empty line for a key that is not set.
            let config = shown(&instance).config;
            println!("{}", config.get(&get.key).map(String::as_str).unwrap_or(""));
        }
        ConfigCommand::Set(set) => {
            let config = set_pairs(&set.pairs)?;
            let change = UpdateInstance {
                config,
                ..Default::default()
            };
            patch(session, &set.instance, &change).await?;
        }
        ConfigCommand::Unset(unset) => {
            let change = UpdateInstance {
                unset: vec![unset.key],
                ..Default::default()
            };
            patch(session, &unset.instance, &change).await?;
        }
        ConfigCommand::Edit(edit) => {
            let before = shown(&fetch(session, &edit.instance).await?);
            let text = if std::io::stdin().is_terminal() {
                in_editor(&render::yaml(&before)?)?
            } else {
                let mut text = String::new();
                std::io::stdin().read_to_string(&mut text)?;
                text
            };
            let edited: Edited = serde_yaml::from_str(&text)
                .context("the edited configuration is not valid YAML")?;
            let change = difference(&before.config, &edited.config);
            if change.config.is_empty() && change.unset.is_empty() {
                return Ok(());
            }
            patch(session, &edit.instance, &change).await?;
        }
        ConfigCommand::Trust(trust) => return super::trust::run(session, trust).await,
        ConfigCommand::Device(device) => match device.command {
            DeviceCommand::Add(add) => {
                let mut dev = pairs(&add.pairs)?;
                dev.insert("type".into(), add.kind.clone());
                let change = UpdateInstance {
                    add_devices: BTreeMap::from([(add.device.clone(), dev)]),
                    ..Default::default()
                };
                patch(session, &add.instance, &change).await?;
                println!("Device {} added to {}", add.device, name_of(&add.instance));
            }
            DeviceCommand::Remove(remove) => {
                let change = UpdateInstance {
                    remove_devices: remove.devices.clone(),
                    ..Default::default()
                };
                patch(session, &remove.instance, &change).await?;
                for dev in &remove.devices {
                    println!("Device {dev} removed from {}", name_of(&remove.instance));
                }
            }
            DeviceCommand::List(list) => {
                for name in live(session, &list.instance).await?.devices.keys() {
                    println!("{name}");
                }
            }
            DeviceCommand::Show(show) => {
                print!(
                    "{}",
                    render::yaml(&live(session, &show.instance).await?.devices)?
                );
            }
        },
    }
    Ok(())
}

fn name_of(raw: &str) -> &str {
    raw.rsplit_once(':').map(|(_, n)| n).unwrap_or(raw)
}

/// `k=v` arguments; a value may contain `=`.
fn pairs(args: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("Invalid key=value configuration: {a}"),
        })
        .collect()
}

/// `config set`'s arguments: `k=v...`, or lxc's older `<key> <value>`.
fn set_pairs(args: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    if let [key, value] = args {
        if !key.contains('=') {
            return Ok(BTreeMap::from([(key.clone(), value.clone())]));
        }
    }
    pairs(args)
}

/// The keys to set (new or changed) and to unset (gone) going from `before` to `after`.
pub fn difference(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> UpdateInstance {
    UpdateInstance {
        config: after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        unset: before
            .keys()
            .filter(|k| !after.contains_key(*k))
            .cloned()
            .collect(),
        ..Default::default()
    }
}

fn in_editor(text: &str) -> anyhow::Result<String> {
    let editor = std::env::var("VISUAL")
        .or_else(|_| std::env::var("EDITOR"))
        .unwrap_or_else(|_| "vi".into());
    let file = tempfile::Builder::new().suffix(".yaml").tempfile()?;
    std::fs::write(file.path(), text)?;
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file.path())
        .status()
        .with_context(|| format!("running {editor}"))?;
    if !status.success() {
        bail!("{editor} exited with {status}");
    }
    Ok(std::fs::read_to_string(file.path())?)
}

async fn patch(
    session: &Session,
    raw: &str,
    change: &UpdateInstance,
) -> anyhow::Result<LiveConfig> {
    let (client, name) = session.target(raw)?;
    let request = client
        .request(Method::PATCH, &format!("/instances/{}", seg(&name)))
        .json(change);
    client.json(request).await
}

async fn live(session: &Session, raw: &str) -> anyhow::Result<LiveConfig> {
    let (client, name) = session.target(raw)?;
    client
        .get(&format!("/instances/{}/config", seg(&name)))
        .await
}

async fn fetch(session: &Session, raw: &str) -> anyhow::Result<Instance> {
    let (client, name) = session.target(raw)?;
    get_instance(&client, &name).await
}

async fn get_instance(client: &Client, name: &str) -> anyhow::Result<Instance> {
    client.get(&format!("/instances/{}", seg(name))).await
}

pub fn shown(instance: &Instance) -> Shown {
    let mut config = instance.config.clone();
    config.insert("limits.cpu".into(), instance.limits.cpu.to_string());
    config.insert(
        "limits.memory".into(),
        format!("{}MiB", instance.limits.memory_mib),
    );
    Shown {
        config,
        devices: BTreeMap::new(),
        ephemeral: false,
        stateful: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_difference_sets_changed_and_unsets_removed_keys() {
        let before = BTreeMap::from([
            ("limits.cpu".to_string(), "1".to_string()),
            ("user.a".to_string(), "1".to_string()),
            ("user.b".to_string(), "2".to_string()),
        ]);
        let after = BTreeMap::from([
            ("limits.cpu".to_string(), "1".to_string()),
            ("user.a".to_string(), "9".to_string()),
            ("user.c".to_string(), "3".to_string()),
        ]);
        let d = difference(&before, &after);
        assert_eq!(
            d.config,
            BTreeMap::from([
                ("user.a".to_string(), "9".to_string()),
                ("user.c".to_string(), "3".to_string())
            ])
        );
        assert_eq!(d.unset, vec!["user.b".to_string()]);
    }

    #[test]
    fn set_takes_pairs_or_key_value() {
        let one = set_pairs(&["user.a".into(), "x=y".into()]).unwrap();
        assert_eq!(one, BTreeMap::from([("user.a".into(), "x=y".into())]));
        let many = set_pairs(&["user.a=1".into(), "user.b=2=3".into()]).unwrap();
        assert_eq!(many["user.b"], "2=3");
        assert!(set_pairs(&["=1".into()]).is_err());
    }
}
