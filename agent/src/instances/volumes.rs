//! Home volumes outside an instance's life: deleting one when a course is torn down for good.
//! Only Cohort's own `home-*` custom volumes in the agent's pool and project, and never one an
//! instance still uses.

use hyper::Method;

use super::InstanceError;
use crate::lxd::encode;
use crate::node::Node;

/// Prefix of the custom volumes the agent makes for homes (see the controller's `home_volume`).
pub const HOME_PREFIX: &str = "home-";

impl Node {
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
        let path = format!(
            "/1.0/storage-pools/{}/volumes/custom/{}",
            encode(&self.config.storage_pool),
            encode(name)
        );
        let volume = match self.lxd.get(&path).await {
            Ok(v) => v,
            Err(e) if e.is_not_found() => {
                return Err(InstanceError::NotFound {
                    field: None,
                    message: format!("volume {name} not found"),
                })
            }
            Err(e) => return Err(e.into()),
        };
        let users: Vec<&str> = volume["used_by"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|u| u.as_str())
            .collect();
        if !users.is_empty() {
            return Err(InstanceError::Conflict(format!(
                "volume {name} is in use by {}",
                users.join(", ")
            )));
        }
        match self.lxd.call(Method::DELETE, &path, None).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Err(InstanceError::NotFound {
                field: None,
                message: format!("volume {name} not found"),
            }),
            Err(e) => Err(e.into()),
        }
    }
}
