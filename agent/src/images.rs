//! Images on the node ([`Images`]): the list the inventory reports, and imports of unified tarballs, either
//! uploaded to the agent or fetched from a URL (the controller's image store). A fetched tarball
//! is streamed to a file beside the agent's state, hashed as it arrives, checked against the
//! expected SHA-256 before LXD sees it, and streamed from there into LXD: an image is never
//! whole in the agent's memory, whatever its size.
//!
//! One image is downloaded once per node at a time: a class's creates all ask for the image
//! a node lacks at once, and each would fetch it again; the others wait for the first and find
//! it in LXD. A download killed with the agent leaves its `.partial` file, which nothing would
//! ever read again: those are swept when the agent starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use cohort_proto::agent::{Image, ImportImage};
use sha2::{Digest, Sha256};

use crate::config::AgentConfig;
use crate::lxd::images::{Image as LxdImage, ImageAliasesEntryPut, ImageAliasesPost};
use crate::lxd::{file_body, full, Lxd, LxdBody, LxdError};

/// Longest an image import may take in LXD.
const IMPORT_TIMEOUT: Duration = Duration::from_secs(1800);
/// Longest a whole download may take, and longest the controller may send nothing.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(1800);
const DOWNLOAD_IDLE: Duration = Duration::from_secs(60);

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

/// The images service: LXD's images, and where the agent keeps downloads and its identity for
/// fetching from the controller.
pub struct Images {
    lxd: Lxd,
    /// Where downloads are kept until LXD has them (`<state_dir>/images`).
    state_dir: std::path::PathBuf,
    key_path: std::path::PathBuf,
    cert_path: std::path::PathBuf,
    ca_path: std::path::PathBuf,
    /// One lock per image (its fingerprint) while an import of it runs or waits.
    imports: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl Images {
    pub fn new(lxd: Lxd, config: &AgentConfig) -> Self {
        Images {
            lxd,
            state_dir: config.state_dir.clone(),
            key_path: config.key_path(),
            cert_path: config.cert_path(),
            ca_path: config.ca_path(),
            imports: Mutex::new(HashMap::new()),
        }
    }

    /// Removes the `.partial` downloads a killed agent left (no import runs yet at start); how
    /// many went.
    pub fn sweep_partials(&self) -> usize {
        let dir = self.state_dir.join("images");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return 0;
        };
        let mut swept = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "partial") {
                match std::fs::remove_file(&path) {
                    Ok(()) => swept += 1,
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "cannot remove a stale download")
                    }
                }
            }
        }
        if swept > 0 {
            tracing::info!(swept, dir = %dir.display(), "removed downloads a killed agent left");
        }
        swept
    }

    /// Waits for the turn of image `fingerprint`: one import of it at a time on this node.
    async fn import_turn(&self, fingerprint: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut imports = self.imports.lock().expect("imports lock");
            imports.retain(|_, weak| weak.strong_count() > 0);
            let key = fingerprint.to_ascii_lowercase();
            match imports.get(&key).and_then(Weak::upgrade) {
                Some(lock) => lock,
                None => {
                    let lock = Arc::new(tokio::sync::Mutex::new(()));
                    imports.insert(key, Arc::downgrade(&lock));
                    lock
                }
            }
        };
        lock.lock_owned().await
    }

    pub async fn images(&self) -> Result<Vec<Image>, LxdError> {
        let list = self.lxd.get_images().await?;
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
        self.import_body(alias, full(tarball)).await
    }

    /// Hands `body` (a unified tarball) to LXD and points `alias` at the image it makes.
    async fn import_body(&self, alias: &str, body: LxdBody) -> Result<Image, ImageError> {
        let fingerprint = self
            .lxd
            .create_image_from_tarball(body, IMPORT_TIMEOUT)
            .await?;
        self.set_alias(alias, &fingerprint).await?;
        Ok(self.lxd.get_image(&fingerprint).await?.into())
    }

    /// Deletes image `fingerprint` and its aliases from LXD: the catalog no longer has it. An
    /// image LXD does not hold is already gone (an earlier attempt, or an admin with `lxc`).
    /// It waits for any import of the same image, so a drop never races a fetch.
    pub async fn delete_image(&self, fingerprint: &str) -> Result<(), ImageError> {
        if fingerprint.len() != 64 || !fingerprint.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ImageError::Invalid {
                field: "fingerprint".into(),
                message: format!("{fingerprint:?} is not an image's SHA-256"),
            });
        }
        let _turn = self.import_turn(fingerprint).await;
        match self.lxd.delete_image(fingerprint).await {
            Ok(()) => {
                tracing::info!(%fingerprint, "image deleted: the catalog no longer has it");
                Ok(())
            }
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Downloads `req.url` to disk, checks its SHA-256, then imports it from there; unless LXD
    /// has the image already (an import of it that ran while this one waited its turn): then
    /// only the alias is pointed at it.
    pub async fn import_image(&self, req: &ImportImage) -> Result<Image, ImageError> {
        check_alias(&req.alias)?;
        let _turn = self.import_turn(&req.fingerprint).await;
        match self.lxd.get_image(&req.fingerprint).await {
            Ok(held) => {
                tracing::info!(fingerprint = %req.fingerprint, alias = %req.alias, "image already here; not downloading it again");
                if held.aliases.iter().any(|a| a.name == req.alias) {
                    return Ok(held.into());
                }
                self.set_alias(&req.alias, &held.fingerprint).await?;
                return Ok(self.lxd.get_image(&held.fingerprint).await?.into());
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        tracing::info!(url = %req.url, fingerprint = %req.fingerprint, "downloading image");
        let dir = self.state_dir.join("images");
        std::fs::create_dir_all(&dir).map_err(|e| ImageError::Download {
            url: req.url.clone(),
            message: format!("cannot make {}: {e}", dir.display()),
        })?;
        // Named for the request, so two imports of one image never share a file.
        let path = dir.join(format!("{}.partial", uuid::Uuid::new_v4()));
        let result = self.download_and_import(req, &path).await;
        let _ = std::fs::remove_file(&path);
        result
    }

    async fn download_and_import(
        &self,
        req: &ImportImage,
        path: &std::path::Path,
    ) -> Result<Image, ImageError> {
        let download = |message: String| ImageError::Download {
            url: req.url.clone(),
            message,
        };
        let client = self.controller_client().map_err(download)?;
        let got = tokio::time::timeout(DOWNLOAD_TIMEOUT, download_to(&client, &req.url, path))
            .await
            .map_err(|_| download(format!("not done after {DOWNLOAD_TIMEOUT:?}")))?
            .map_err(download)?;
        if !got.eq_ignore_ascii_case(&req.fingerprint) {
            return Err(ImageError::Invalid {
                field: "fingerprint".into(),
                message: format!("the tarball's SHA-256 is {got}, not {}", req.fingerprint),
            });
        }
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| download(format!("cannot reopen {}: {e}", path.display())))?;
        self.import_body(&req.alias, file_body(file)).await
    }

    /// An HTTPS client for the controller's image store: this node's certificate as its identity,
    /// the Cohort CA saved at join as the only trust root, and only a server with the controller
    /// role accepted ([`crate::tls::controller_client_config`]): never another node.
    pub(crate) fn controller_client(&self) -> Result<reqwest::Client, String> {
        let read = |path: std::path::PathBuf| {
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let mut identity = read(self.key_path.clone())?;
        identity.extend_from_slice(&read(self.cert_path.clone())?);
        let ca = read(self.ca_path.clone())?;
        let tls =
            crate::tls::controller_client_config(&ca, &identity).map_err(|e| e.to_string())?;
        reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|e| e.to_string())
    }

    pub(crate) async fn set_alias(&self, alias: &str, fingerprint: &str) -> Result<(), LxdError> {
        let entry = ImageAliasesPost {
            name: alias.into(),
            target: fingerprint.into(),
        };
        match self.lxd.create_image_alias(&entry).await {
            Ok(_) => Ok(()),
            Err(e)
                if e.lxd_message()
                    .is_some_and(|m| m.contains("already exists")) =>
            {
                let entry = ImageAliasesEntryPut {
                    target: fingerprint.into(),
                    description: String::new(),
                };
                self.lxd.update_image_alias(alias, &entry).await
            }
            Err(e) => Err(e),
        }
    }
}

/// Streams `url` into a new file at `path`, hashing as it goes; the hex SHA-256 of what came.
pub(crate) async fn download_to(
    client: &reqwest::Client,
    url: &str,
    path: &std::path::Path,
) -> Result<String, String> {
    use tokio::io::AsyncWriteExt;
    let mut resp = client
        .get(url)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| e.to_string())?;
    let mut file = tokio::fs::File::create(path)
        .await
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let mut hash = Sha256::new();
    loop {
        let chunk = tokio::time::timeout(DOWNLOAD_IDLE, resp.chunk())
            .await
            .map_err(|_| format!("nothing received for {DOWNLOAD_IDLE:?}"))?
            .map_err(|e| e.to_string())?;
        let Some(chunk) = chunk else { break };
        hash.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    file.flush().await.map_err(|e| e.to_string())?;
    Ok(hex::encode(hash.finalize()))
}
