//! `/1.0/instances/{name}/files?path=P`: a file read from an instance or written into it, its
//! owner and mode in headers (`client/lxd_instances.go`: `GetInstanceFile`,
//! `CreateInstanceFile`). Which headers the daemon reads is [`super::daemon`]'s to say.

use std::time::Duration;

use bytes::Bytes;

use super::client::{encode, LxdBody, RawFile, RawStream};
use super::instances::instance_url;
use super::{Lxd, LxdError};

/// Longest a file push may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(300);

/// `/1.0/instances/{name}/files?path=P`, the path query-escaped.
fn file_url(instance: &str, path: &str) -> String {
    format!("{}/files?path={}", instance_url(instance), encode(path))
}

impl Lxd {
    /// The file at `path` in `instance`, read whole, with the headers that describe it.
    pub async fn get_instance_file(&self, instance: &str, path: &str) -> Result<RawFile, LxdError> {
        self.get_raw(&file_url(instance, path)).await
    }

    /// The file at `path` in `instance`, unread.
    pub async fn get_instance_file_stream(
        &self,
        instance: &str,
        path: &str,
    ) -> Result<RawStream, LxdError> {
        self.get_stream(&file_url(instance, path)).await
    }

    /// Writes `bytes` to `path` in `instance` (a file, or with the type header a directory),
    /// as `headers` say.
    pub async fn create_instance_file(
        &self,
        instance: &str,
        path: &str,
        headers: &[(&str, String)],
        bytes: Bytes,
    ) -> Result<(), LxdError> {
        self.post_raw(&file_url(instance, path), headers, bytes, PUSH_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// Writes a streamed body to `path` in `instance`, as `headers` say, within `timeout`.
    pub async fn create_instance_file_stream(
        &self,
        instance: &str,
        path: &str,
        headers: &[(&str, String)],
        body: LxdBody,
        timeout: Duration,
    ) -> Result<(), LxdError> {
        self.post_stream(&file_url(instance, path), headers, body, timeout)
            .await
            .map(|_| ())
    }
}
