//! `/api/v1/images`: catalog, upload and the tarball agents import from.

use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use cohort_proto::api::images::{ImagePatch, ImportImageQuery, PublishImage};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

use super::extract::{ApiJson, ApiQuery, PeerCertificate};
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::error::ActionError;
use crate::images::catalog::{self, ImageUpload, TarballReader};
use crate::images::distribution;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn list(ctl: Ctl, bearer: Bearer) -> Reply {
    Ok(HttpResponse::Ok().json(catalog::list(&ctl, bearer).await?))
}

pub async fn get(ctl: Ctl, bearer: Bearer, name: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(catalog::get(&ctl, bearer, name.into_inner()).await?))
}

/// Streams the body to disk; nothing is recorded unless the whole upload arrives.
pub async fn import(
    ctl: Ctl,
    caller: Caller,
    query: ApiQuery<ImportImageQuery>,
    mut body: web::Payload,
) -> Reply {
    let mut upload = ImageUpload::begin(&ctl, &caller, &query.0)?;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ActionError::invalid("body", e.to_string()))?;
        upload.write(&chunk)?;
    }
    Ok(HttpResponse::Created().json(upload.finish(&ctl, caller, query.0).await?))
}

pub async fn publish(ctl: Ctl, caller: Caller, req: ApiJson<PublishImage>) -> Reply {
    Ok(HttpResponse::Accepted().json(catalog::publish(&ctl, caller, req.0).await?))
}

pub async fn distribute(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    let answer = distribution::distribute(&ctl, caller, name.into_inner()).await?;
    Ok(HttpResponse::Accepted().json(answer))
}

pub async fn rename(
    ctl: Ctl,
    caller: Caller,
    name: web::Path<String>,
    req: ApiJson<ImagePatch>,
) -> Reply {
    let image = catalog::rename(&ctl, caller, name.into_inner(), req.0).await?;
    Ok(HttpResponse::Ok().json(image))
}

pub async fn delete(ctl: Ctl, caller: Caller, name: web::Path<String>) -> Reply {
    catalog::delete(&ctl, caller, name.into_inner()).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// For agents (node certificate on the TLS connection) or admins (bearer token).
pub async fn tarball(ctl: Ctl, req: HttpRequest, fingerprint: web::Path<String>) -> Reply {
    let reader = match req.conn_data::<PeerCertificate>() {
        Some(peer) => TarballReader::NodeCertificate(peer.0.clone()),
        None => TarballReader::Person(Caller::extract(&req).await?),
    };
    let path = catalog::tarball(&ctl, reader, fingerprint.into_inner()).await?;
    Ok(tarball_response(&path).await?)
}

/// A tarball's bytes as the answer, streamed in chunks: tarballs are hundreds of MiB. The REST
/// API and the LXD-style API's `image export` both answer with it.
pub async fn tarball_response(path: &std::path::Path) -> std::io::Result<HttpResponse> {
    let file = tokio::fs::File::open(path).await?;
    let size = file.metadata().await?.len();
    let chunks = futures_util::stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(web::Bytes::from(buf)), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    Ok(HttpResponse::Ok()
        .content_type("application/octet-stream")
        .no_chunking(size)
        .streaming(chunks))
}
