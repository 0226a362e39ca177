//! Start, stop (clean shutdown within a timeout, then forced), restart and delete. Each is
//! idempotent: starting a running instance, stopping a stopped one or deleting a missing one
//! succeeds.

use std::time::Duration;

use cohort_proto::agent::{Instance, StateAction, StateChange};

use super::InstanceError;
use super::Instances;
use crate::lxd::instances::{InstancePut, InstanceStatePut};
use crate::lxd::LxdError;

/// Seconds given to a clean shutdown when the request names none.
const DEFAULT_STOP_TIMEOUT_S: u32 = 30;

/// Starts tried before a `forkstart` failure is reported.
const START_ATTEMPTS: u32 = 6;

impl Instances {
    async fn put_state(
        &self,
        name: &str,
        state: InstanceStatePut,
        timeout: Duration,
    ) -> Result<(), LxdError> {
        self.lxd.update_instance_state(name, &state, timeout).await
    }

    pub(crate) async fn start_instance(&self, name: &str) -> Result<(), InstanceError> {
        let _daemon = crate::lxd::lock::start_lock(&self.config.lxd_socket()).await;
        // An instance made before the node had its network gets its NIC on this start.
        self.prepare_guest_network(name).await?;
        self.apply_deferred_root_size(name).await?;
        self.start_unlocked(name).await
    }

    /// Starts `name`; the caller holds the daemon's start lock.
    pub(crate) async fn start_unlocked(&self, name: &str) -> Result<(), InstanceError> {
        // LXD 5.0.2 sometimes gives one of several containers started at once on a daemon an
        // isolated idmap outside /etc/subuid ("newuidmap ... not allowed"), and `forkstart`
        // fails (and LXD then runs a clean-up "stop" for a moment); the next start picks a
        // valid range. So a failed forkstart is tried again a few times before it counts.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self
                .put_state(
                    name,
                    InstanceStatePut {
                        action: "start",
                        timeout: None,
                        force: None,
                    },
                    Duration::from_secs(120),
                )
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if e.is_not_found() => {
                    return Err(InstanceError::instance_missing(name, &e))
                }
                Err(e)
                    if e.lxd_message()
                        .is_some_and(|m| m.contains("already running")) =>
                {
                    return Ok(())
                }
                Err(e)
                    if attempt < START_ATTEMPTS
                        && e.lxd_message().is_some_and(|m| {
                            m.contains("forkstart") || m.contains("is busy running")
                        }) =>
                {
                    tracing::info!(
                        instance = name,
                        attempt,
                        "start failed in forkstart; trying again"
                    );
                    tokio::time::sleep(Duration::from_millis(1000 * attempt as u64)).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Asks for a clean shutdown; when it does not finish within `timeout_s`, forces it.
    pub(crate) async fn stop_instance(
        &self,
        name: &str,
        timeout_s: u32,
        force: bool,
    ) -> Result<(), InstanceError> {
        let graceful = if force {
            Err(None)
        } else {
            let body = InstanceStatePut {
                action: "stop",
                timeout: Some(timeout_s),
                force: Some(false),
            };
            let wait = Duration::from_secs(u64::from(timeout_s) + 10);
            self.put_state(name, body, wait).await.map_err(Some)
        };
        match graceful {
            Ok(()) => return Ok(()),
            Err(Some(e)) if e.is_not_found() => {
                return Err(InstanceError::instance_missing(name, &e))
            }
            Err(Some(e))
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already stopped")) =>
            {
                return Ok(())
            }
            Err(Some(e)) => tracing::info!(instance = name, "clean stop failed ({e}); forcing"),
            Err(None) => {}
        }
        let forced = self
            .put_state(
                name,
                InstanceStatePut {
                    action: "stop",
                    timeout: None,
                    force: Some(true),
                },
                Duration::from_secs(60),
            )
            .await;
        match forced {
            Ok(()) => Ok(()),
            Err(e)
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already stopped")) =>
            {
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Makes `boot.autostart` follow the state Cohort wants: LXD starts every container whose
    /// key is true when the daemon or the node starts (and, when the key is unset, every one
    /// that was running at shutdown), so a container Cohort stopped (idle reclaim, course end,
    /// teardown, its instructor or its student) would otherwise come back, GPU and all.
    pub(crate) async fn set_autostart(&self, name: &str, on: bool) -> Result<(), InstanceError> {
        let patch = InstancePut::config([("boot.autostart".into(), on.to_string())].into());
        match self.lxd.patch_instance(name, &patch).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(InstanceError::instance_missing(name, &e)),
            Err(e) => Err(e.into()),
        }
    }

    /// `PUT /v1/instances/{name}/state`.
    pub async fn change_state(
        &self,
        name: &str,
        change: &StateChange,
    ) -> Result<Instance, InstanceError> {
        super::check_name(name)?;
        let timeout = change.timeout_s.unwrap_or(DEFAULT_STOP_TIMEOUT_S);
        // Set before the change, so that a stop whose answer is lost is never undone by a
        // reboot; a start that fails leaves autostart on, which is what was asked for.
        self.set_autostart(name, change.action != StateAction::Stop)
            .await?;
        match change.action {
            StateAction::Start => self.start_instance(name).await?,
            StateAction::Stop => self.stop_instance(name, timeout, change.force).await?,
            StateAction::Restart => {
                self.stop_instance(name, timeout, change.force).await?;
                self.start_instance(name).await?;
            }
        }
        self.instance(name).await
    }

    /// Deletes an instance (stopping it first). Missing is success. Home volumes stay.
    pub async fn delete_instance(&self, name: &str) -> Result<(), InstanceError> {
        let Some(lx) = self.lxd_instance(name).await? else {
            return Ok(());
        };
        if lx.status != "Stopped" {
            match self.stop_instance(name, 0, true).await {
                Ok(()) | Err(InstanceError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        match self.lxd.delete_instance(name).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        // Its address is free again: no rule of its policy may stay on it.
        self.network.rebuild_firewall().await;
        Ok(())
    }
}
