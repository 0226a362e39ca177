//! The shift of a new container's files into its range before its first start (`idmap::shift`
//! does the walk), where this LXD would otherwise remap them on the start.

use super::{InstanceError, Instances};
use crate::idmap::shift::{shift_tree, Remap};
use crate::lxd::instances::InstancePut;

impl Instances {
    /// Before the first start of `name`: moves its files into its range and records that,
    /// where this LXD would otherwise remap them on the start (see the module); whether it did.
    /// Anything that stops the walk leaves the remap to LXD, which finishes any part done.
    pub async fn shift_before_first_start(&self, name: &str) -> Result<bool, InstanceError> {
        if !self.idmap.remaps_first_start() {
            return Ok(false);
        }
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(false);
        };
        let config = |k: &str| lx.config.get(k).map(String::as_str);
        let (Some(next), Some(last)) = (
            config("volatile.idmap.next"),
            config("volatile.last_state.idmap"),
        ) else {
            return Ok(false);
        };
        if next == last || lx.status != "Stopped" {
            return Ok(false);
        }
        let map = match Remap::new(last, next) {
            Ok(map) => map,
            Err(e) => {
                tracing::debug!(instance = name, error = %e, "not shifting ahead of LXD");
                return Ok(false);
            }
        };
        let rootfs = self.idmap.rootfs(name);
        let started = std::time::Instant::now();
        let walk = tokio::task::spawn_blocking(move || shift_tree(&rootfs, &map)).await;
        let done = match walk {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                tracing::warn!(instance = name, error = %e, "shift before the first start stopped; LXD remaps at the start");
                return Ok(false);
            }
            Err(e) => {
                tracing::warn!(instance = name, error = %e, "shift before the first start failed; LXD remaps at the start");
                return Ok(false);
            }
        };
        let patch =
            InstancePut::config([("volatile.last_state.idmap".into(), next.to_string())].into());
        self.lxd.patch_instance(name, &patch).await?;
        let took = started.elapsed();
        self.idmap.record_shift(took);
        tracing::debug!(
            instance = name,
            files = done.files,
            ms = took.as_millis() as u64,
            "shifted into its range before the first start"
        );
        Ok(true)
    }
}
