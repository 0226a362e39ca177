//! `/1.0/instances`: reading, creating, changing, starting and stopping, and deleting the
//! project's containers (`client/lxd_instances.go`), with the request bodies named after LXD's
//! own objects (`shared/api/instance.go`, `instance_state.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use hyper::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{encode, to_json};
use super::{Config, Devices, Lxd, LxdError};

/// `/1.0/instances/{name}`, the name path-escaped.
pub(super) fn instance_url(name: &str) -> String {
    format!("/1.0/instances/{}", encode(name))
}

/// An instance as `GET /1.0/instances/{name}?recursion=1` (or a `recursion=2` listing) gives it:
/// what the agent reads of it.
#[derive(Debug, Deserialize)]
pub struct Instance {
    pub name: String,
    pub status: String,
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub config: Config,
    #[serde(default, deserialize_with = "super::null_as_empty")]
    pub devices: Devices,
    #[serde(default)]
    pub created_at: Option<DateTime<Utc>>,
    #[serde(default)]
    pub state: Option<InstanceState>,
}

/// `GET /1.0/instances/{name}/state`, as a recursive read embeds it.
#[derive(Debug, Deserialize)]
pub struct InstanceState {
    #[serde(default)]
    pub processes: i64,
    /// The container's init process on the host (0 when it is not running).
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub cpu: Option<Usage>,
    #[serde(default)]
    pub memory: Option<Usage>,
    #[serde(default)]
    pub disk: Option<BTreeMap<String, Usage>>,
}

/// A usage figure of LXD's instance state. LXD's type is a signed integer and it answers -1
/// for one it could not read (seen here on a container's state while the container changed
/// state), so it is read signed and such a figure counts as unknown, like an absent one.
#[derive(Debug, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub usage: i64,
}

impl Usage {
    pub fn known(&self) -> u64 {
        u64::try_from(self.usage).unwrap_or(0)
    }
}

/// An instance's writable fields (`InstancePut`). The same object is the body of a `PUT` (which
/// resets whatever it omits), of a `PATCH` (which changes only what it names; a config key set
/// to "" is removed, devices merge by name) and of a restore (`restore` alone). A field left
/// `None` is not sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct InstancePut {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Config>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Devices>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stateful: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The snapshot to go back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
}

impl InstancePut {
    /// A `PATCH` of config keys alone.
    pub fn config(config: Config) -> Self {
        InstancePut {
            config: Some(config),
            ..Default::default()
        }
    }

    /// The body of a `PUT` that replaces `current` (as LXD returned it) with `config` and
    /// `devices`, keeping its other writable fields as they are: a `PUT` resets whatever it
    /// omits.
    pub fn replacing(current: &InstanceCurrent, config: Config, devices: Devices) -> Self {
        InstancePut {
            config: Some(config),
            devices: Some(devices),
            restore: None,
            ..current.put.clone()
        }
    }
}

/// An instance as read before a `PUT`: its status and its writable fields, under the `ETag`.
#[derive(Debug, Deserialize)]
pub struct InstanceCurrent {
    #[serde(default)]
    pub status: String,
    #[serde(flatten)]
    pub put: InstancePut,
}

impl InstanceCurrent {
    /// The instance's own `config` (never `expanded_config`).
    pub fn config(&self) -> Config {
        self.put.config.clone().unwrap_or_default()
    }

    /// The instance's own `devices` (never `expanded_devices`).
    pub fn devices(&self) -> Devices {
        self.put.devices.clone().unwrap_or_default()
    }
}

/// Where a new instance comes from (`InstanceSource`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum InstanceSource {
    /// An image by alias or fingerprint.
    Image { alias: String },
    /// A copy of another instance of the project.
    Copy { source: String, instance_only: bool },
}

/// The body of `POST /1.0/instances` (`InstancesPost`).
#[derive(Debug, Clone, Serialize)]
pub struct InstancesPost {
    pub name: String,
    /// `container`.
    #[serde(rename = "type")]
    pub kind: String,
    pub source: InstanceSource,
    pub profiles: Vec<String>,
    pub config: Config,
    pub devices: Devices,
}

/// The body of `PUT /1.0/instances/{name}/state` (`InstanceStatePut`).
#[derive(Debug, Clone, Serialize)]
pub struct InstanceStatePut {
    /// `start`, `stop`, `restart`, ...
    pub action: &'static str,
    /// Seconds a clean stop may take.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

impl Lxd {
    /// `GET /1.0/instances/{name}?recursion=1`: the instance with its state.
    pub async fn get_instance(&self, name: &str) -> Result<Instance, LxdError> {
        self.get_as(&format!("{}?recursion=1", instance_url(name)))
            .await
    }

    /// `GET /1.0/instances/{name}`: the instance without its state. The state is what costs: the
    /// daemon gathers each process count, network counter and disk usage (on Incus 6.0 also every
    /// snapshot and backup) for a recursive read, and a create read its instance five times.
    pub async fn get_instance_config(&self, name: &str) -> Result<Instance, LxdError> {
        self.get_as(&instance_url(name)).await
    }

    /// `GET /1.0/instances/{name}`: the instance and its `ETag`, for a `PUT` with `If-Match`.
    pub async fn get_instance_current(
        &self,
        name: &str,
    ) -> Result<(InstanceCurrent, Option<String>), LxdError> {
        let path = instance_url(name);
        let (current, etag) = self.get_with_etag(&path).await?;
        let current = serde_json::from_value(current).map_err(|e| LxdError::Decode {
            what: format!("GET {path}"),
            detail: e.to_string(),
        })?;
        Ok((current, etag))
    }

    /// `GET /1.0/instances?recursion=2`: every instance of the project, state included, in one
    /// call.
    pub async fn get_instances(&self) -> Result<Vec<Instance>, LxdError> {
        self.get_as("/1.0/instances?recursion=2").await
    }

    /// `GET /1.0/instances?recursion=1`: every instance of the project without its state. On
    /// Incus 6.0 the state is most of a listing's cost: 10 ms of the daemon's CPU for 303
    /// instances without it (measured), about 7.8 ms an instance with it (2.3 s at 300).
    pub async fn get_instances_brief(&self) -> Result<Vec<Instance>, LxdError> {
        self.get_as("/1.0/instances?recursion=1").await
    }

    /// `GET /1.0/instances/{name}/state`, as LXD words it (addresses per interface, usage), for
    /// the controller's LXD-style API to pass on unchanged.
    pub async fn get_instance_state_raw(&self, name: &str) -> Result<Value, LxdError> {
        self.get(&format!("{}/state", instance_url(name))).await
    }

    /// `GET /1.0/instances/{name}/console`: the container's console log as LXD keeps it.
    pub async fn get_console_log(&self, name: &str) -> Result<bytes::Bytes, LxdError> {
        Ok(self
            .get_raw(&format!("{}/console", instance_url(name)))
            .await?
            .bytes)
    }

    /// Every instance's `state` as LXD words it, by name, from one `recursion=2` listing.
    pub async fn get_instance_states_raw(&self) -> Result<BTreeMap<String, Value>, LxdError> {
        let listing = self.get("/1.0/instances?recursion=2").await?;
        Ok(listing
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| Some((i["name"].as_str()?.to_string(), i.get("state")?.clone())))
            .collect())
    }

    /// `GET /1.0/instances`: the names of the project's instances.
    pub async fn get_instance_names(&self) -> Result<Vec<String>, LxdError> {
        let urls: Vec<String> = self.get_as("/1.0/instances").await?;
        Ok(urls
            .iter()
            .filter_map(|u| u.split('?').next()?.rsplit('/').next())
            .map(String::from)
            .collect())
    }

    /// `GET /1.0/instances?all-projects=true&recursion=1` on the daemon unscoped: every
    /// instance of every project, as raw objects (the address and idmap bookkeeping reads
    /// `expanded_devices` and `volatile.*` keys of whatever it finds).
    pub async fn get_instances_all_projects(&self) -> Result<Vec<Value>, LxdError> {
        let listing = self
            .unscoped()
            .get("/1.0/instances?all-projects=true&recursion=1")
            .await?;
        Ok(listing.as_array().cloned().unwrap_or_default())
    }

    /// `POST /1.0/instances`.
    pub async fn create_instance(&self, instance: &InstancesPost) -> Result<(), LxdError> {
        self.send_json(Method::POST, "/1.0/instances", instance)
            .await
            .map(|_| ())
    }

    /// `POST /1.0/instances` without waiting for it: the daemon's operation (its URL) when it
    /// answered async, as it does, for the caller to wait on ([`Lxd::wait_for`]) and, when
    /// that wait runs out, to wait on again later rather than take the instance for made.
    pub async fn begin_create_instance(
        &self,
        instance: &InstancesPost,
    ) -> Result<Option<String>, LxdError> {
        let body =
            bytes::Bytes::from(serde_json::to_vec(instance).expect("a create body serialises"));
        let headers = [(
            hyper::header::CONTENT_TYPE.as_str(),
            "application/json".to_string(),
        )];
        match self
            .answer(Method::POST, "/1.0/instances", &headers, body)
            .await?
        {
            super::envelope::Answer::Sync(_) => Ok(None),
            super::envelope::Answer::Async { operation, .. } => Ok(Some(operation)),
        }
    }

    /// `PATCH /1.0/instances/{name}`: only what `patch` names changes.
    pub async fn patch_instance(&self, name: &str, patch: &InstancePut) -> Result<(), LxdError> {
        self.send_json(Method::PATCH, &instance_url(name), patch)
            .await
            .map(|_| ())
    }

    /// `PUT /1.0/instances/{name}` under `If-Match: etag` (a whole replacement, or a restore).
    pub async fn update_instance(
        &self,
        name: &str,
        put: &InstancePut,
        etag: Option<&str>,
    ) -> Result<(), LxdError> {
        self.put_if_match(&instance_url(name), &to_json(put), etag)
            .await
            .map(|_| ())
    }

    /// `PUT /1.0/instances/{name}/state`, waited for up to `timeout`.
    pub async fn update_instance_state(
        &self,
        name: &str,
        state: &InstanceStatePut,
        timeout: Duration,
    ) -> Result<(), LxdError> {
        let path = format!("{}/state", instance_url(name));
        self.call_within(Method::PUT, &path, Some(&to_json(state)), timeout)
            .await
            .map(|_| ())
    }

    /// `DELETE /1.0/instances/{name}`.
    pub async fn delete_instance(&self, name: &str) -> Result<(), LxdError> {
        self.call(Method::DELETE, &instance_url(name), None)
            .await
            .map(|_| ())
    }
}
