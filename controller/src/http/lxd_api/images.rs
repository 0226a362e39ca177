//! `/1.0/images` and `/1.0/images/aliases`: the fleet's images (one alias each in Cohort),
//! through the actions of `/api/v1/images`. Admins upload (`lxc image import`, pylxd's
//! `images.create`), alias, export and delete them here as with `cohort image`; an upload
//! without an alias is catalogued under a provisional one until `POST /1.0/images/aliases`
//! names it, as `lxc image import --alias` and pylxd do right after uploading.

use actix_web::{web, HttpRequest, HttpResponse};
use cohort_proto::api::images::{Image, ImagePatch, ImportImageQuery};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::instances::Listing;
use super::operations::DoneOperations;
use super::reply::{sync, LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::error::ActionError;
use crate::images::catalog::{self, ImageUpload, TarballReader};

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
        "aliases": if catalog::is_unnamed(&image.alias, &image.fingerprint) {
            json!([])
        } else {
            json!([{"name": image.alias, "description": ""}])
        },
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

/// `POST /1.0/images` with the image in the body (a unified tarball, as `lxc image import FILE`
/// and pylxd send it): admins only, as `cohort image import`. The upload is stored before the
/// answer, whose operation is already done and names the fingerprint.
pub async fn upload(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    req: HttpRequest,
    mut body: web::Payload,
) -> LxdReply {
    let kind = req
        .headers()
        .get(actix_web::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if kind.starts_with("application/json") {
        let mut json = bytes::BytesMut::new();
        while let Some(chunk) = body.next().await {
            let chunk =
                chunk.map_err(|e| LxdError::BadRequest(format!("Reading the request: {e}")))?;
            if json.len() + chunk.len() > MAX_JSON {
                return Err(LxdError::BadRequest("The request is too large".into()));
            }
            json.extend_from_slice(&chunk);
        }
        let post: ImagesPost = serde_json::from_slice(&json)
            .map_err(|e| LxdError::BadRequest(format!("Invalid request: {e}")))?;
        return publish(&ctl, client, post).await;
    }
    if kind.starts_with("multipart/") {
        return Err(LxdError::not_supported(
            "split images (metadata and root filesystem apart): upload one unified tarball",
        ));
    }
    let caller = caller_of(&ctl, client).await?;
    let user_id = caller.user.id;
    let mut upload = ImageUpload::begin_unnamed(&ctl, &caller)?;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| LxdError::BadRequest(format!("Reading the upload: {e}")))?;
        upload.write(&chunk)?;
    }
    let query = ImportImageQuery {
        alias: String::new(),
        description: None,
        gpu_ready: None,
        jupyter: None,
    };
    let image = upload.finish(&ctl, caller, query).await?;
    Ok(done.answer(
        user_id,
        "Downloading image",
        json!({"images": [format!("/1.0/images/{}", image.fingerprint)]}),
        json!({"fingerprint": image.fingerprint, "size": image.size_bytes}),
    ))
}

/// `api.ImagePut`: what pylxd's `image.save()` and `lxc image edit` send back. Of the
/// properties only `description` is the catalog's to change; `cohort.gpu_ready` is read from
/// the image when it is uploaded, and the others LXD keeps are not kept by Cohort.
#[derive(Debug, Deserialize)]
pub struct ImagePut {
    #[serde(default)]
    properties: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    public: bool,
}

/// `PUT /1.0/images/{fingerprint}` (admins): the `description` property, as `GET` shows it.
pub async fn put(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    fingerprint: web::Path<String>,
    body: web::Json<ImagePut>,
) -> LxdReply {
    let body = body.into_inner();
    if body.public {
        return Err(LxdError::not_supported(
            "public images (the catalog is served to Cohort's own users)",
        ));
    }
    let properties = body.properties.unwrap_or_default();
    let image = one(&ctl, LxdClient(client.0.clone()), &fingerprint).await?;
    let shown = lxd_image(&image);
    for (key, value) in &properties {
        if key != "description" && shown["properties"][key].as_str() != Some(value.as_str()) {
            return Err(LxdError::BadRequest(format!(
                "Image property {key}: only description can be changed in Cohort's catalog"
            )));
        }
    }
    let caller = caller_of(&ctl, client).await?;
    let user_id = caller.user.id;
    let description = properties.get("description").cloned().unwrap_or_default();
    if description != image.description {
        catalog::describe(&ctl, caller, image.fingerprint.clone(), description).await?;
    }
    Ok(done.answer(
        user_id,
        "Updating image",
        json!({"images": [format!("/1.0/images/{}", image.fingerprint)]}),
        json!({}),
    ))
}

/// Largest JSON body of `POST /1.0/images` (a publish request is a few hundred bytes).
const MAX_JSON: usize = 64 * 1024;

/// `api.ImagesPost` as `lxc publish` and pylxd's `instance.publish()` send it: an image made
/// from an instance here.
#[derive(Debug, Deserialize)]
pub struct ImagesPost {
    #[serde(default)]
    source: Option<ImageSource>,
    /// `lxc` sends `null` for the lists and maps it leaves empty.
    #[serde(default)]
    aliases: Option<Vec<AliasName>>,
    #[serde(default)]
    properties: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    public: bool,
}

#[derive(Debug, Deserialize)]
pub struct ImageSource {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    name: String,
    /// Set when the image is on another server.
    #[serde(default)]
    server: String,
}

#[derive(Debug, Deserialize)]
pub struct AliasName {
    name: String,
}

/// `POST /1.0/images` from an instance: Cohort's publish (`cohort image publish`), so its roles,
/// namespaces and the stopped-instance rule apply, answered with its operation; once it
/// succeeds the operation's metadata names the image's fingerprint, as LXD's does. Without an
/// alias (an admin's) the image is catalogued under [`catalog::unnamed_publish_alias`] until
/// `lxc publish` names it; a non-admin publishes under their own name, so gives one.
async fn publish(ctl: &Ctl, client: LxdClient, post: ImagesPost) -> LxdReply {
    let source = post.source.unwrap_or(ImageSource {
        kind: String::new(),
        name: String::new(),
        server: String::new(),
    });
    if !matches!(source.kind.as_str(), "instance" | "container") || !source.server.is_empty() {
        return Err(LxdError::not_supported(
            "images from another server (import a unified tarball)",
        ));
    }
    if source.name.contains('/') {
        return Err(LxdError::not_supported(
            "publishing a snapshot (publish the stopped instance)",
        ));
    }
    if post.public {
        return Err(LxdError::not_supported(
            "public images (the catalog is served to Cohort's own users)",
        ));
    }
    let aliases = post.aliases.unwrap_or_default();
    if aliases.len() > 1 {
        return Err(LxdError::BadRequest(
            "A Cohort image has one alias: give at most one".into(),
        ));
    }
    let caller = caller_of(ctl, client).await?;
    let alias = match aliases.into_iter().next() {
        Some(a) => a.name,
        None => catalog::unnamed_publish_alias(&source.name),
    };
    let request = cohort_proto::api::images::PublishImage {
        instance: source.name,
        alias,
        description: post.properties.and_then(|p| p.get("description").cloned()),
    };
    let op = catalog::publish(ctl, caller, request).await?;
    Ok(super::operations::accepted(&op))
}

/// The one image `wanted` names by fingerprint or unique prefix.
async fn one(ctl: &Ctl, client: LxdClient, wanted: &str) -> Result<Image, LxdError> {
    let all = catalog::list(ctl, client.0).await?;
    let mut found = all
        .into_iter()
        .filter(|i| !wanted.is_empty() && i.fingerprint.starts_with(wanted));
    match (found.next(), found.next()) {
        (Some(image), None) => Ok(image),
        (Some(_), Some(_)) => Err(LxdError::BadRequest("More than one image matches".into())),
        (None, _) => Err(ActionError::NotFound("Image".into()).into()),
    }
}

/// `DELETE /1.0/images/{fingerprint}`: admins only, an image no instance uses.
pub async fn delete(
    ctl: Ctl,
    done: web::Data<DoneOperations>,
    client: LxdClient,
    fingerprint: web::Path<String>,
) -> LxdReply {
    let image = one(&ctl, LxdClient(client.0.clone()), &fingerprint).await?;
    let caller = caller_of(&ctl, client).await?;
    let user_id = caller.user.id;
    catalog::delete(&ctl, caller, image.fingerprint.clone()).await?;
    Ok(done.answer(
        user_id,
        "Deleting image",
        json!({"images": [format!("/1.0/images/{}", image.fingerprint)]}),
        json!({}),
    ))
}

/// `GET /1.0/images/{fingerprint}/export`: the tarball as it was uploaded (admins only, as the
/// catalog's tarballs are), so its SHA-256 is the fingerprint.
pub async fn export(
    ctl: Ctl,
    client: LxdClient,
    fingerprint: web::Path<String>,
) -> Result<HttpResponse, LxdError> {
    let image = one(&ctl, LxdClient(client.0.clone()), &fingerprint).await?;
    let caller = caller_of(&ctl, client).await?;
    let path = catalog::tarball(
        &ctl,
        TarballReader::Person(caller),
        image.fingerprint.clone(),
    )
    .await?;
    let mut reply = crate::http::api::images::tarball_response(&path)
        .await
        .map_err(ActionError::Io)?;
    if let Ok(value) = actix_web::http::header::HeaderValue::from_str(&format!(
        "attachment; filename={}.tar.gz",
        image.fingerprint
    )) {
        reply
            .headers_mut()
            .insert(actix_web::http::header::CONTENT_DISPOSITION, value);
    }
    Ok(reply)
}

/// `api.ImageAliasesPost`.
#[derive(Debug, Deserialize)]
pub struct AliasesPost {
    name: String,
    target: String,
    #[serde(default)]
    description: String,
}

/// `POST /1.0/images/aliases`: names an image (admins only). A Cohort image has one alias, so
/// this names an image uploaded without one; an image named already keeps its alias.
pub async fn add_alias(ctl: Ctl, client: LxdClient, body: web::Json<AliasesPost>) -> LxdReply {
    let body = body.into_inner();
    let _ = body.description;
    let image = one(&ctl, LxdClient(client.0.clone()), &body.target).await?;
    if !catalog::is_unnamed(&image.alias, &image.fingerprint) && image.alias != body.name {
        return Err(LxdError::not_supported(format!(
            "a second alias: a Cohort image has one, and this one is {} (rename it with cohort \
             image rename)",
            image.alias
        )));
    }
    let caller = caller_of(&ctl, client).await?;
    catalog::rename(
        &ctl,
        caller,
        image.fingerprint,
        ImagePatch { alias: body.name },
    )
    .await?;
    Ok(sync(json!({})))
}
