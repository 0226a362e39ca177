//! `cohort config show|get`: the instance's LXD config as the controller knows it (the keys it
//! passed plus `limits.cpu`/`limits.memory`, which the agent sets from the limits), in lxc's YAML.

use std::collections::BTreeMap;

use cohort_proto::api::instances::Instance;
use serde::Serialize;

use super::Session;
use crate::args::config::{Config, ConfigCommand};
use crate::client::seg;
use crate::render;

/// `lxc config show`'s document, with the fields Cohort can state truthfully.
#[derive(Debug, Serialize)]
pub struct Shown {
    pub config: BTreeMap<String, String>,
    /// Cohort makes persistent containers only.
    pub ephemeral: bool,
    /// Snapshots are never stateful.
    pub stateful: bool,
}

pub async fn run(session: &Session, args: Config) -> anyhow::Result<()> {
    match args.command {
        ConfigCommand::Show(show) => {
            let instance = fetch(session, &show.instance).await?;
            print!("{}", render::yaml(&shown(&instance))?);
        }
        ConfigCommand::Get(get) => {
            let instance = fetch(session, &get.instance).await?;
            // lxc prints an empty line for a key that is not set.
            let config = shown(&instance).config;
            println!("{}", config.get(&get.key).map(String::as_str).unwrap_or(""));
        }
    }
    Ok(())
}

async fn fetch(session: &Session, raw: &str) -> anyhow::Result<Instance> {
    let (client, name) = session.target(raw)?;
    client.get(&format!("/instances/{}", seg(&name))).await
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
        ephemeral: false,
        stateful: false,
    }
}
