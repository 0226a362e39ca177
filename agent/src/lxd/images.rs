//! `/1.0/images` and `/1.0/images/aliases`: the node's images, imports of unified tarballs,
//! publishing an instance, exports and aliases (`client/lxd_images.go`, `shared/api/image.go`).

use std::collections::BTreeMap;
use std::time::Duration;

use hyper::Method;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::client::{encode, LxdBody, RawFile};
use super::{Lxd, LxdError};

fn image_url(fingerprint: &str) -> String {
    format!("/1.0/images/{}", encode(fingerprint))
}

/// An image as `GET /1.0/images/{fingerprint}` gives it.
#[derive(Debug, Deserialize)]
pub struct Image {
    pub fingerprint: String,
    #[serde(default)]
    pub aliases: Vec<ImageAlias>,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    #[serde(default)]
    pub size: u64,
}

/// One alias of an image.
#[derive(Debug, Deserialize)]
pub struct ImageAlias {
    pub name: String,
}

/// The body of `POST /1.0/images/aliases` (`ImageAliasesPost`).
#[derive(Debug, Serialize)]
pub struct ImageAliasesPost {
    pub name: String,
    pub target: String,
}

/// The body of `PUT /1.0/images/aliases/{name}` (`ImageAliasesEntryPut`): the whole entry.
#[derive(Debug, Serialize)]
pub struct ImageAliasesEntryPut {
    pub target: String,
    pub description: String,
}

/// Where a published image comes from (`ImagesPostSource`).
#[derive(Debug, Serialize)]
pub struct ImagesPostSource {
    /// `instance`.
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
}

/// The body of `POST /1.0/images` that publishes an instance (`ImagesPost`).
#[derive(Debug, Serialize)]
pub struct ImagesPost {
    pub source: ImagesPostSource,
    pub properties: BTreeMap<String, String>,
}

/// The fingerprint of the image an import or a publish made, from its operation's metadata.
fn fingerprint(meta: &Value, what: &str, detail: String) -> Result<String, LxdError> {
    meta.get("fingerprint")
        .and_then(|f| f.as_str())
        .map(str::to_string)
        .ok_or_else(|| LxdError::Decode {
            what: what.into(),
            detail,
        })
}

impl Lxd {
    /// `GET /1.0/images?recursion=1`.
    pub async fn get_images(&self) -> Result<Vec<Image>, LxdError> {
        self.get_as("/1.0/images?recursion=1").await
    }

    /// `GET /1.0/images/{fingerprint}` (a unique prefix will do).
    pub async fn get_image(&self, fingerprint: &str) -> Result<Image, LxdError> {
        self.get_as(&image_url(fingerprint)).await
    }

    /// `POST /1.0/images` with a unified tarball as the body, waited for up to `timeout`: the
    /// fingerprint of the image it made.
    pub async fn create_image_from_tarball(
        &self,
        tarball: LxdBody,
        timeout: Duration,
    ) -> Result<String, LxdError> {
        let headers = [("Content-Type", "application/octet-stream".to_string())];
        let meta = self
            .post_stream("/1.0/images", &headers, tarball, timeout)
            .await?;
        fingerprint(
            &meta,
            "image import",
            "no fingerprint in the operation".into(),
        )
    }

    /// `POST /1.0/images` from an instance, waited for up to `timeout`: the new image's
    /// fingerprint.
    pub async fn create_image(
        &self,
        image: &ImagesPost,
        timeout: Duration,
    ) -> Result<String, LxdError> {
        let body = super::client::to_json(image);
        let meta = self
            .call_within(Method::POST, "/1.0/images", Some(&body), timeout)
            .await?;
        fingerprint(
            &meta,
            "image publish",
            format!("no fingerprint in the operation: {meta}"),
        )
    }

    /// `GET /1.0/images/{fingerprint}/export`: the tarball, at most `limit` bytes of it.
    pub async fn export_image(&self, fingerprint: &str, limit: usize) -> Result<RawFile, LxdError> {
        let path = format!("{}/export", image_url(fingerprint));
        self.get_raw_within(&path, limit).await
    }

    /// `DELETE /1.0/images/{fingerprint}`.
    pub async fn delete_image(&self, fingerprint: &str) -> Result<(), LxdError> {
        self.call(Method::DELETE, &image_url(fingerprint), None)
            .await
            .map(|_| ())
    }

    /// `GET /1.0/images/aliases/{name}`: whether it is there is all the agent asks.
    pub async fn get_image_alias(&self, alias: &str) -> Result<(), LxdError> {
        self.get(&format!("/1.0/images/aliases/{}", encode(alias)))
            .await
            .map(|_| ())
    }

    /// `POST /1.0/images/aliases`.
    pub async fn create_image_alias(&self, alias: &ImageAliasesPost) -> Result<(), LxdError> {
        self.send_json(Method::POST, "/1.0/images/aliases", alias)
            .await
            .map(|_| ())
    }

    /// `PUT /1.0/images/aliases/{name}`: the alias points at another image. Never `PATCH`:
    /// LXD 5.0.2 answers any `PATCH` of an alias only with "context deadline exceeded", its
    /// database held, after 20 to 30 s (a pylxd suite run on a node holding its previous run's
    /// aliases took 40 s a container so); `PUT` is immediate on LXD and Incus alike.
    pub async fn update_image_alias(
        &self,
        alias: &str,
        entry: &ImageAliasesEntryPut,
    ) -> Result<(), LxdError> {
        let path = format!("/1.0/images/aliases/{}", encode(alias));
        self.send_json(Method::PUT, &path, entry).await.map(|_| ())
    }
}
