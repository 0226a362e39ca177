//! Images on the node: the list the inventory reports, and imports of unified tarballs, either
//! uploaded to the agent or fetched from a URL (the controller's image store) and checked
//! against the expected SHA-256 before LXD sees them.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use cohort_proto::agent::{Image, ImportImage};
use hyper::Method;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::lxd::{encode, LxdError};
use crate::node::Node;

/// Longest an image import may take in LXD.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// the request broke a rule (400)
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// the tarball could not be downloaded (502)
    #[error("downloading {url}: {message}")]
    Download { url: String, message: String },
    /// LXD refused or failed
    #[error(transparent)]
    Lxd(#[from] LxdError),
}

#[derive(Debug, Deserialize)]
struct LxdImage {
    fingerprint: String,
    #[serde(default)]
    aliases: Vec<LxdAlias>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
    #[serde(default)]
    size: u64,
}

#[derive(Debug, Deserialize)]
struct LxdAlias {
    name: String,
}

impl From<LxdImage> for Image {
    fn from(i: LxdImage) -> Self {
        Image {
            fingerprint: i.fingerprint,
            aliases: i.aliases.into_iter().map(|a| a.name).collect(),
            description: i.properties.get("description").cloned().unwrap_or_default(),
            size_bytes: i.size,
            gpu_ready: i
                .properties
                .get("cohort.gpu_ready")
                .is_some_and(|v| v == "true"),
        }
    }
}

pub(crate) fn check_alias(alias: &str) -> Result<(), ImageError> {
    let ok = !alias.is_empty()
        && alias.len() <= 255
        && alias
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ImageError::Invalid {
            field: "alias".into(),
            message: format!("{alias:?} is not a valid image alias"),
        })
    }
}

impl Node {
    pub async fn images(&self) -> Result<Vec<Image>, LxdError> {
        let list: Vec<LxdImage> = self.lxd.get_as("/1.0/images?recursion=1").await?;
        Ok(list.into_iter().map(Image::from).collect())
    }

    /// Imports a unified tarball and points `alias` at it.
    pub async fn upload_image(&self, alias: &str, tarball: Bytes) -> Result<Image, ImageError> {
        check_alias(alias)?;
        if tarball.is_empty() {
            return Err(ImageError::Invalid {
                field: "body".into(),
                message: "the image tarball is empty".into(),
            });
        }
        let headers = [("Content-Type", "application/octet-stream".to_string())];
        let meta = self
            .lxd
            .post_raw("/1.0/images", &headers, tarball, IMPORT_TIMEOUT)
            .await?;
        let fingerprint = meta
            .get("fingerprint")
            .and_then(|f| f.as_str())
            .ok_or_else(|| LxdError::Decode {
                what: "image import".into(),
                detail: "no fingerprint in the operation".into(),
            })?
            .to_string();
        self.set_alias(alias, &fingerprint).await?;
        let image: LxdImage = self
            .lxd
            .get_as(&format!("/1.0/images/{}", encode(&fingerprint)))
            .await?;
        Ok(image.into())
    }

    /// Downloads `req.url`, checks its SHA-256, then imports it.
    pub async fn import_image(&self, req: &ImportImage) -> Result<Image, ImageError> {
        check_alias(&req.alias)?;
        let download = |message: String| ImageError::Download {
            url: req.url.clone(),
            message,
        };
        let resp = self
            .controller_client()
            .map_err(download)?
            .get(&req.url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| download(e.to_string()))?;
        let bytes = resp.bytes().await.map_err(|e| download(e.to_string()))?;
        let got = hex::encode(Sha256::digest(&bytes));
        if !got.eq_ignore_ascii_case(&req.fingerprint) {
            return Err(ImageError::Invalid {
                field: "fingerprint".into(),
                message: format!("the tarball's SHA-256 is {got}, not {}", req.fingerprint),
            });
        }
        self.upload_image(&req.alias, bytes).await
    }

    /// An HTTPS client for the controller's image store: this node's certificate as its identity,
    /// the Cohort CA saved at join as the only trust root, and only a server with the controller
    /// role accepted ([`crate::tls::controller_client_config`]): never another node.
    fn controller_client(&self) -> Result<reqwest::Client, String> {
        let read = |path: std::path::PathBuf| {
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let mut identity = read(self.config.key_path())?;
        identity.extend_from_slice(&read(self.config.cert_path())?);
        let ca = read(self.config.ca_path())?;
        let tls =
            crate::tls::controller_client_config(&ca, &identity).map_err(|e| e.to_string())?;
        reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn set_alias(&self, alias: &str, fingerprint: &str) -> Result<(), LxdError> {
        let body = json!({"name": alias, "target": fingerprint});
        match self
            .lxd
            .call(Method::POST, "/1.0/images/aliases", Some(&body))
            .await
        {
            Ok(_) => Ok(()),
            Err(e)
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already exists")) =>
            {
                let path = format!("/1.0/images/aliases/{}", encode(alias));
                self.lxd
                    .call(Method::PATCH, &path, Some(&json!({"target": fingerprint})))
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }
}
