//! Publishing a stopped instance as an image (`lxc publish`): LXD makes the image
//! (`POST /1.0/images` from the instance, waited on), the agent reads its unified tarball
//! (`GET /1.0/images/{fingerprint}/export`) for the controller's catalog, and the image is deleted
//! from the node again unless the request keeps it (then under its alias).

use std::time::Duration;

use bytes::Bytes;
use cohort_proto::agent::PublishInstance;

use super::InstanceError;
use super::Instances;
use crate::lxd::images::{ImagesPost, ImagesPostSource};
use crate::lxd::LxdError;

/// Longest LXD may take to pack an instance into an image.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(1800);
/// Largest tarball read back.
const MAX_TARBALL: usize = 8 * 1024 * 1024 * 1024;

/// An exported image: LXD's fingerprint (the SHA-256 of the unified tarball) and the tarball.
pub struct Published {
    pub fingerprint: String,
    pub tarball: Bytes,
}

impl Instances {
    /// `POST /v1/instances/{name}/publish`: 409 unless the instance is stopped.
    pub async fn publish_instance(
        &self,
        name: &str,
        req: &PublishInstance,
    ) -> Result<Published, InstanceError> {
        super::check_name(name)?;
        if let Some(alias) = &req.alias {
            crate::images::check_alias(alias).map_err(|_| {
                InstanceError::invalid("alias", format!("{alias:?} is not a valid image alias"))
            })?;
        }
        if let Some(d) = &req.description {
            cohort_proto::validate::display_text(d, 255)
                .map_err(|e| InstanceError::invalid("description", e.0))?;
        }
        let Some(lx) = self.lxd_instance(name).await? else {
            return Err(InstanceError::NotFound {
                field: None,
                message: format!("instance {name} not found"),
            });
        };
        if lx.status != "Stopped" {
            return Err(InstanceError::Conflict(format!(
                "instance {name} is {}; stop it before publishing",
                lx.status
            )));
        }
        let image = ImagesPost {
            source: ImagesPostSource {
                kind: "instance".into(),
                name: name.into(),
            },
            properties: [(
                "description".to_string(),
                req.description.clone().unwrap_or_default(),
            )]
            .into(),
        };
        let fingerprint = self.lxd.create_image(&image, PUBLISH_TIMEOUT).await?;
        let exported = self.export(&fingerprint, req).await;
        if !req.keep || exported.is_err() {
            match self.lxd.delete_image(&fingerprint).await {
                Ok(_) => {}
                Err(e) if e.is_not_found() => {}
                Err(e) => tracing::warn!(%fingerprint, "published image not deleted: {e}"),
            }
        }
        let tarball = exported?;
        Ok(Published {
            fingerprint,
            tarball,
        })
    }

    async fn export(
        &self,
        fingerprint: &str,
        req: &PublishInstance,
    ) -> Result<Bytes, InstanceError> {
        if req.keep {
            if let Some(alias) = &req.alias {
                self.images.set_alias(alias, fingerprint).await?;
            }
        }
        let file = self.lxd.export_image(fingerprint, MAX_TARBALL).await?;
        let is_multipart = file
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("multipart/"));
        if is_multipart {
            return Err(InstanceError::Lxd(LxdError::Decode {
                what: "image export".into(),
                detail: "LXD exported a split image; only unified tarballs are published".into(),
            }));
        }
        Ok(file.bytes)
    }
}
