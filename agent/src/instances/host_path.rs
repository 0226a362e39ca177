//! Host paths a disk device mounts, resolved on this host before they are checked: a link or a
//! kernel view (`/proc/self/root`) names the host's `/` without writing it, so the rule shared
//! with the controller (`validate::host_path`) is applied to where the path really leads, and
//! LXD is given that resolved path.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cohort_proto::validate;

use super::InstanceError;
use super::Instances;

/// `path` with every link resolved, or why it cannot be mounted.
fn resolve(path: &Path) -> Result<PathBuf, String> {
    std::fs::canonicalize(path)
        .map_err(|e| format!("{} cannot be resolved on this node: {e}", path.display()))
}

impl Instances {
    /// The directories this agent and its LXD keep state in, resolved as sources are.
    pub(super) fn state_dirs(&self) -> Vec<String> {
        [self.config.state_dir.clone(), self.config.lxd_dir()]
            .iter()
            .flat_map(|dir| [dir.clone(), resolve(dir).unwrap_or_else(|_| dir.clone())])
            .map(|dir| dir.display().to_string())
            .collect()
    }

    /// Resolves a disk's host `source` and checks it; the source becomes the resolved path.
    pub(super) fn resolve_host_source(
        &self,
        dev: &str,
        conf: &mut BTreeMap<String, String>,
    ) -> Result<(), InstanceError> {
        let field = format!("devices.{dev}.source");
        let source = conf.get("source").cloned().unwrap_or_default();
        let state_dirs = self.state_dirs();
        validate::host_path(&source, &state_dirs)
            .map_err(|e| InstanceError::invalid(field.clone(), e.0))?;
        let resolved = resolve(Path::new(&source))
            .map_err(|message| InstanceError::invalid(field.clone(), message))?;
        let resolved = resolved.display().to_string();
        validate::host_path(&resolved, &state_dirs).map_err(|e| {
            InstanceError::invalid(field, format!("{source} resolves to {resolved}: {}", e.0))
        })?;
        conf.insert("source".into(), resolved);
        Ok(())
    }
}
