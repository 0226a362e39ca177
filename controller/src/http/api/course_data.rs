//! `/api/v1/courses/{code}/data` (a course's datasets) and `/api/v1/data/{sha256}/tarball`
//! (what agents fetch).

use actix_web::{web, FromRequest, HttpRequest, HttpResponse};
use cohort_proto::api::course_data::{DataQuota, DatasetRemoved, PushDatasetQuery};
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

use super::extract::{ApiJson, ApiQuery, PeerCertificate};
use crate::accounts::auth::{Bearer, Caller};
use crate::app::state::Controller;
use crate::courses::data::{self, DatasetPush};
use crate::error::ActionError;
use crate::images::catalog::TarballReader;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

pub async fn list(ctl: Ctl, bearer: Bearer, code: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(data::list(&ctl, bearer, code.into_inner()).await?))
}

/// Streams the body to the data store; nothing is recorded unless the whole push arrives and
/// passes.
pub async fn push(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    query: ApiQuery<PushDatasetQuery>,
    mut body: web::Payload,
) -> Reply {
    let mut push = DatasetPush::begin(&ctl, &caller, code.into_inner(), query.0).await?;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| ActionError::invalid("body", e.to_string()))?;
        push.write(&chunk)?;
    }
    Ok(HttpResponse::Created().json(push.finish(&ctl, caller).await?))
}

pub async fn remove(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (code, name) = path.into_inner();
    let operation = data::remove(&ctl, caller, code, name).await?;
    Ok(HttpResponse::Ok().json(DatasetRemoved { operation }))
}

pub async fn set_quota(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<DataQuota>,
) -> Reply {
    Ok(HttpResponse::Ok().json(data::set_quota(&ctl, caller, code.into_inner(), req.0).await?))
}

/// For agents (node certificate on the TLS connection) or admins (bearer token).
pub async fn tarball(ctl: Ctl, req: HttpRequest, sha256: web::Path<String>) -> Reply {
    let reader = match req.conn_data::<PeerCertificate>() {
        Some(peer) => TarballReader::NodeCertificate(peer.0.clone()),
        None => TarballReader::Person(Caller::extract(&req).await?),
    };
    let path = data::tarball(&ctl, reader, sha256.into_inner()).await?;
    let file = tokio::fs::File::open(&path).await?;
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
