//! `GET /1.0/images` and `/1.0/images/aliases`: the fleet's images (one alias each in Cohort),
//! through the action `GET /api/v1/images` uses.

use actix_web::{web, HttpRequest};
use cohort_proto::api::images::Image;
use serde_json::{json, Value};

use super::instances::Listing;
use super::reply::{sync, LxdError, LxdReply};
use super::{Ctl, LxdClient};
use crate::images::catalog;

/// `api.Image`.
fn lxd_image(image: &Image) -> Value {
    json!({
        "fingerprint": image.fingerprint,
        "filename": format!("{}.tar.gz", image.fingerprint),
        "size": image.size_bytes,
        "architecture": "x86_64",
        "type": "container",
        "public": false,
        "auto_update": false,
        "cached": false,
        "properties": {
            "description": image.description,
            "cohort.gpu_ready": image.gpu_ready.to_string(),
        },
        "aliases": [{"name": image.alias, "description": ""}],
        "created_at": image.created_at,
        "uploaded_at": image.created_at,
        "last_used_at": image.created_at,
        "expires_at": "0001-01-01T00:00:00Z",
        "profiles": [],
        "update_source": null,
    })
}

pub async fn list(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let listing = Listing::of(&req);
    if listing.filtered {
        return Err(LxdError::not_supported("server-side filters on images"));
    }
    let all = catalog::list(&ctl, client.0).await?;
    Ok(if listing.recursion >= 1 {
        sync(all.iter().map(lxd_image).collect::<Vec<_>>())
    } else {
        sync(
            all.iter()
                .map(|i| format!("/1.0/images/{}", i.fingerprint))
                .collect::<Vec<_>>(),
        )
    })
}

/// One image by fingerprint (or its unique prefix, as lxc abbreviates it).
pub async fn get(ctl: Ctl, client: LxdClient, fingerprint: web::Path<String>) -> LxdReply {
    let wanted = fingerprint.into_inner();
    let all = catalog::list(&ctl, client.0).await?;
    let mut found = all.iter().filter(|i| i.fingerprint.starts_with(&wanted));
    match (found.next(), found.next()) {
        (Some(image), None) => Ok(sync(lxd_image(image))),
        (Some(_), Some(_)) => Err(LxdError::BadRequest("More than one image matches".into())),
        (None, _) => Err(crate::error::ActionError::NotFound("Image".into()).into()),
    }
}

pub async fn aliases(ctl: Ctl, client: LxdClient, req: HttpRequest) -> LxdReply {
    let all = catalog::list(&ctl, client.0).await?;
    Ok(if Listing::of(&req).recursion >= 1 {
        sync(
            all.iter()
                .map(|i| {
                    json!({"name": i.alias, "target": i.fingerprint, "description": "",
                                "type": "container"})
                })
                .collect::<Vec<_>>(),
        )
    } else {
        sync(
            all.iter()
                .map(|i| format!("/1.0/images/aliases/{}", i.alias))
                .collect::<Vec<_>>(),
        )
    })
}

/// `GET /1.0/images/aliases/{name}`: aliases hold `/` (`cohort/base`), so the tail is taken
/// whole.
pub async fn alias(ctl: Ctl, client: LxdClient, name: web::Path<String>) -> LxdReply {
    let name = name.into_inner();
    catalog::list(&ctl, client.0)
        .await?
        .iter()
        .find(|i| i.alias == name)
        .map(|i| {
            sync(
                json!({"name": i.alias, "target": i.fingerprint, "description": "",
                        "type": "container"}),
            )
        })
        .ok_or_else(|| crate::error::ActionError::NotFound("Image alias".into()).into())
}
