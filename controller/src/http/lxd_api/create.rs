//! `POST /1.0/instances` (`lxc init|launch REMOTE:IMAGE NAME`): a container from one of the
//! fleet's images, placed by Cohort's scheduler (`?target=NODE` pins it), through the same
//! action as `POST /api/v1/instances`, so roles, allowances and the config allow-list apply.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest};
use cohort_proto::api::instances::CreateInstance;
use serde::Deserialize;

use super::instances::Listing;
use super::operations::accepted;
use super::reply::{LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::images::catalog;
use crate::instances::manage;

/// `api.InstancesPost`, the fields Cohort acts on; the others must be absent or LXD's defaults.
#[derive(Debug, Deserialize)]
pub struct InstancesPost {
    /// None given: one is made up, as LXD does ([`generated_name`]).
    #[serde(default)]
    name: String,
    #[serde(default)]
    source: Source,
    #[serde(default)]
    config: BTreeMap<String, String>,
    #[serde(default)]
    devices: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default, rename = "type")]
    kind: String,
    /// Kept, and shown by `GET` as LXD does.
    #[serde(default)]
    description: String,
}

#[derive(Debug, Default, Deserialize)]
pub struct Source {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    alias: String,
    #[serde(default)]
    fingerprint: String,
    /// Set when the image is on another server: Cohort places only its own images.
    #[serde(default)]
    server: String,
}

/// `256MiB`, `1GiB`, `512MB`, `2GB` or bytes, in MiB (rounded up).
fn memory_mib(value: &str) -> Result<u64, LxdError> {
    let value = value.trim();
    let split = value
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| LxdError::BadRequest(format!("Invalid limits.memory {value:?}")))?;
    let invalid = || LxdError::BadRequest(format!("Invalid limits.memory {value:?}"));
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "kB" => 1000,
        "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "GiB" => 1 << 30,
        _ => return Err(invalid()),
    };
    // Checked: a size past 16 EiB is refused, never a panic or a wrapped small number.
    let bytes = number.checked_mul(factor).ok_or_else(invalid)?;
    Ok(bytes.div_ceil(1 << 20))
}

/// The name of an instance asked for without one: `instance-` and eight random hex digits (LXD
/// makes up a word pair; either is unlikely to be taken, and a taken one is refused as usual).
fn generated_name() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("instance-{}", &random[..8])
}

pub async fn create(
    ctl: Ctl,
    client: LxdClient,
    req: HttpRequest,
    body: web::Json<InstancesPost>,
) -> LxdReply {
    let body = body.into_inner();
    if !body.kind.is_empty() && body.kind != "container" {
        return Err(LxdError::not_supported("virtual machines"));
    }
    if body.source.kind == "copy" || body.source.kind == "migration" {
        return Err(LxdError::not_supported(
            "copying instances (lxc copy): Cohort makes instances from images; publish one with \
             cohort image publish and launch from it",
        ));
    }
    if body.source.kind != "image" || !body.source.server.is_empty() {
        return Err(LxdError::not_supported(
            "instances from anything but an image of this server",
        ));
    }
    if !body.devices.is_empty() {
        return Err(LxdError::not_supported(
            "devices at creation (add them with lxc config device add)",
        ));
    }
    let listing = Listing::of(&req);
    if listing.project != "default" {
        return Err(LxdError::not_supported(
            "creating instances in a course's project (use cohort course provision)",
        ));
    }
    let target = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(k, _)| k == "target")
        .map(|(_, v)| v.into_owned());
    let image = if body.source.alias.is_empty() {
        let known = catalog::list(&ctl, client.0.clone()).await?;
        known
            .into_iter()
            .find(|i| i.fingerprint == body.source.fingerprint)
            .map(|i| i.alias)
            .ok_or_else(|| crate::error::ActionError::NotFound("Image".into()))?
    } else {
        body.source.alias
    };
    let mut config = body.config;
    let mut limits = manage::DEFAULT_LIMITS;
    let mut limited = false;
    if let Some(cpu) = config.remove("limits.cpu") {
        limits.cpu = cpu
            .parse()
            .map_err(|_| LxdError::BadRequest(format!("Invalid limits.cpu {cpu:?}")))?;
        limited = true;
    }
    if let Some(memory) = config.remove("limits.memory") {
        limits.memory_mib = memory_mib(&memory)?;
        limited = true;
    }
    let caller = caller_of(&ctl, client).await?;
    let name = if body.name.is_empty() {
        generated_name()
    } else {
        body.name
    };
    let description = body.description;
    manage::check_description(&description)?;
    let request = CreateInstance {
        name: name.clone(),
        image,
        limits: limited.then_some(limits),
        config,
        node: target,
        gpus: 0,
        gpu_model: None,
        gpu_share: Default::default(),
        owner: None,
        strategy: Default::default(),
        priority: 0,
        queue: true,
        // `lxc launch` starts it with a request of its own once it exists.
        start: false,
    };
    let op = manage::create(&ctl, caller.clone(), request).await?;
    if !description.is_empty() {
        manage::describe(&ctl, caller, name, description).await?;
    }
    Ok(accepted(&op))
}

#[cfg(test)]
mod tests {
    use super::memory_mib;

    #[test]
    fn memory_sizes_read_as_lxd_writes_them() {
        assert_eq!(memory_mib("256MiB").unwrap(), 256);
        assert_eq!(memory_mib("1GiB").unwrap(), 1024);
        assert_eq!(memory_mib("1GB").unwrap(), 954);
        assert!(memory_mib("18446744074GB").is_err(), "overflow refused");
        assert!(
            memory_mib("18446744073709551615GiB").is_err(),
            "overflow refused"
        );
        assert_eq!(memory_mib("1048576").unwrap(), 1);
        assert!(memory_mib("lots").is_err());
        assert!(memory_mib("5XB").is_err());
    }
}
