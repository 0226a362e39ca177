//! `PUT /1.0/instances/{name}`: `lxc config set|unset`, `lxc config device add|remove` and
//! `lxc restore`. LXD's client sends the whole instance back; Cohort applies the difference from
//! what `GET` showed through the action of `PATCH /api/v1/instances/{name}`, so its allow-list,
//! roles and device rules decide, and their refusals reach the client as LXD errors.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest};
use cohort_proto::api::instances::{Instance, UpdateInstance};
use serde::Deserialize;

use super::instances::{in_project, shown_config, SHOWN_ONLY};
use super::operations::DoneOperations;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, snapshots, Ctl, LxdClient};
use crate::instances::manage;

type Devices = BTreeMap<String, BTreeMap<String, String>>;

/// `api.InstancePut`, the fields Cohort acts on; the others (architecture) are not Cohort's to
/// change and are ignored, as `GET` shows them fixed. `lxc restore` sends
/// `null` for the maps; a map not sent changes nothing.
#[derive(Debug, Deserialize)]
pub struct InstancePut {
    #[serde(default)]
    restore: String,
    #[serde(default)]
    stateful: bool,
    #[serde(default)]
    config: Option<BTreeMap<String, String>>,
    #[serde(default)]
    devices: Option<Devices>,
    #[serde(default)]
    profiles: Option<Vec<String>>,
    #[serde(default)]
    ephemeral: bool,
    /// Not sent: unchanged.
    #[serde(default)]
    description: Option<String>,
}

/// The change that turns what `GET` showed of `instance` into `config` and `devices`: `live`
/// are the devices LXD holds now (what `GET` showed), so a device sent that is not among them,
/// or differs, is one to add, and one of them not sent is one to remove. `devices` is `None`
/// when the client sent no map, which changes no device.
fn difference(
    instance: &Instance,
    config: BTreeMap<String, String>,
    devices: Option<(Devices, Devices)>,
) -> Result<UpdateInstance, LxdError> {
    let shown = shown_config(instance);
    let mut change = UpdateInstance::default();
    if let Some((sent, live)) = devices {
        change.remove_devices = live
            .keys()
            .filter(|name| !sent.contains_key(*name))
            .cloned()
            .collect();
        change.add_devices = sent
            .into_iter()
            .filter(|(name, device)| live.get(name) != Some(device))
            .collect();
    }
    for key in shown.keys() {
        if !config.contains_key(key) && !SHOWN_ONLY.contains(&key.as_str()) {
            change.unset.push(key.clone());
        }
    }
    for (key, value) in config {
        if shown.get(&key) == Some(&value) {
            continue;
        }
        if SHOWN_ONLY.contains(&key.as_str()) {
            return Err(LxdError::BadRequest(format!(
                "{key} is set by Cohort and cannot be changed"
            )));
        }
        change.config.insert(key, value);
    }
    Ok(change)
}

pub async fn put(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
    body: web::Json<InstancePut>,
) -> LxdReply {
    let body = body.into_inner();
    let name = name.into_inner();
    if !body.restore.is_empty() {
        return snapshots::restore(&ctl, &done, client, name, &req, body.restore, body.stateful)
            .await;
    }
    if body.profiles.is_some_and(|p| !p.is_empty()) {
        return Err(LxdError::not_supported("profiles"));
    }
    if body.ephemeral {
        return Err(LxdError::not_supported("ephemeral instances"));
    }
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    let instance = in_project(&ctl, client, name.clone(), &req).await?;
    let devices = match body.devices {
        Some(sent) => {
            let live = manage::live_config(&ctl, caller.clone(), name.clone()).await?;
            Some((sent, live.devices))
        }
        None => None,
    };
    let change = difference(
        &instance,
        body.config.unwrap_or_else(|| shown_config(&instance)),
        devices,
    )?;
    let caller_id = caller.user.id;
    if let Some(description) = body.description {
        if description != instance.description.clone().unwrap_or_default() {
            manage::describe(&ctl, caller.clone(), name.clone(), description).await?;
        }
    }
    if change != UpdateInstance::default() {
        manage::update(&ctl, caller, name.clone(), change).await?;
    }
    Ok(done.instance_changed(caller_id, "Updating instance", &name))
}
