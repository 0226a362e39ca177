//! Home volumes outside an instance's life: deleting one when a course is torn down for good.
//! Only Cohort's own `home-*` custom volumes in the agent's pool and project, and never one an
//! instance still uses.

use super::InstanceError;
use super::Instances;

/// Prefix of the custom volumes the agent makes for homes (see the controller's `home_volume`).
pub const HOME_PREFIX: &str = "home-";

impl Instances {
    /// `DELETE /v1/volumes/{name}`: 404 when absent, 409 while an instance uses it.
    pub async fn delete_volume(&self, name: &str) -> Result<(), InstanceError> {
        cohort_proto::validate::instance_name(name)
            .map_err(|e| InstanceError::invalid("name", e.0.replace("instance", "volume")))?;
        if !name.starts_with(HOME_PREFIX) {
            return Err(InstanceError::invalid(
                "name",
                format!("only Cohort home volumes ({HOME_PREFIX}*) can be deleted"),
            ));
        }
        let pool = &self.config.storage_pool;
        let volume = match self.lxd.get_custom_volume(pool, name).await {
            Ok(v) => v,
            Err(e) if e.is_not_found() => {
                return Err(InstanceError::NotFound {
                    field: None,
                    message: format!("volume {name} not found"),
                })
            }
            Err(e) => return Err(e.into()),
        };
        if !volume.used_by.is_empty() {
            return Err(InstanceError::Conflict(format!(
                "volume {name} is in use by {}",
                volume.used_by.join(", ")
            )));
        }
        match self.lxd.delete_custom_volume(pool, name).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(InstanceError::NotFound {
                field: None,
                message: format!("volume {name} not found"),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
