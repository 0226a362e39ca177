//! Images: the template catalog ([`catalog`]), the check that an upload is an LXD image
//! ([`format`]) and distributing one to nodes ahead of a class ([`distribution`]). Publishing an
//! instance as an image is a job step (`crate::jobs::publish`).

pub mod catalog;
pub mod distribution;
pub mod format;

use crate::db::models::image::Image;
use crate::error::{ActionError, ActionResult};

/// A course or instance asking for `gpus` GPUs needs an image marked GPU-ready (its
/// `cohort.gpu_ready` property, or `gpu_ready` on import): anything else is a 409 naming `image`.
pub fn check_gpu_ready(image: &Image, gpus: u32, asked_as: &str) -> ActionResult<()> {
    if gpus == 0 || image.gpu_ready {
        return Ok(());
    }
    Err(ActionError::conflict(
        Some("image"),
        format!(
            "image {asked_as} is not marked GPU-ready (cohort.gpu_ready): GPUs need one that is"
        ),
    ))
}
