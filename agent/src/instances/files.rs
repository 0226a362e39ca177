//! File push and pull through LXD's file API, with owner and mode carried in headers.

use std::time::Duration;

use bytes::Bytes;

use super::InstanceError;
use crate::lxd::encode;
use crate::node::Node;

/// A file read from an instance.
pub struct FileContent {
    pub bytes: Bytes,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

fn files_path(name: &str, path: &str) -> Result<String, InstanceError> {
    if !path.starts_with('/') || path.contains('\0') {
        return Err(InstanceError::invalid("path", "must be an absolute path"));
    }
    Ok(format!("{}/files?path={}", super::path(name), encode(path)))
}

impl Node {
    pub async fn pull_file(&self, name: &str, path: &str) -> Result<FileContent, InstanceError> {
        super::check_name(name)?;
        let url = files_path(name, path)?;
        let raw = self.lxd.get_raw(&url).await.map_err(|e| {
            if e.is_not_found() {
                InstanceError::NotFound {
                    field: Some("path".into()),
                    message: format!(
                        "{path} not found in {name} (LXD: {})",
                        e.lxd_message().unwrap_or_default()
                    ),
                }
            } else {
                e.into()
            }
        })?;
        let header = |k: &str| {
            raw.headers
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        if header("X-LXD-type").as_deref() == Some("directory") {
            return Err(InstanceError::invalid(
                "path",
                format!("{path} is a directory"),
            ));
        }
        let num = |k: &str, radix: u32| {
            header(k)
                .and_then(|v| u32::from_str_radix(v.trim_start_matches("0o"), radix).ok())
                .unwrap_or(0)
        };
        Ok(FileContent {
            mode: num("X-LXD-mode", 8),
            uid: num("X-LXD-uid", 10),
            gid: num("X-LXD-gid", 10),
            bytes: raw.bytes,
        })
    }

    pub async fn push_file(
        &self,
        name: &str,
        path: &str,
        bytes: Bytes,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), InstanceError> {
        super::check_name(name)?;
        if mode > 0o7777 {
            return Err(InstanceError::invalid("mode", "must be at most 07777"));
        }
        let url = files_path(name, path)?;
        let headers = [
            ("Content-Type", "application/octet-stream".to_string()),
            ("X-LXD-type", "file".to_string()),
            ("X-LXD-write", "overwrite".to_string()),
            ("X-LXD-mode", format!("{mode:04o}")),
            ("X-LXD-uid", uid.to_string()),
            ("X-LXD-gid", gid.to_string()),
        ];
        self.lxd
            .post_raw(&url, &headers, bytes, Duration::from_secs(300))
            .await
            .map_err(|e| {
                if e.is_not_found() {
                    InstanceError::instance_missing(name, &e)
                } else {
                    e.into()
                }
            })?;
        Ok(())
    }
}
