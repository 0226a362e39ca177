//! `/api/v1/courses/{code}/archive` (archive the homes, list the archives),
//! `/api/v1/courses/{code}/archive-days` (how long the course's archives are kept),
//! `/api/v1/courses/{code}/archive/{user}` (one student's `.tar.gz`) and
//! `/api/v1/courses/{code}/archive.tar` (the class as one tar of the students' `.tar.gz`).
//! Files are streamed from the archive store as they are read.

use std::path::Path;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use cohort_proto::api::course_archives::ArchiveCourse;
use cohort_proto::api::courses::CourseArchiveDays;
use futures_util::StreamExt;
use tokio::io::AsyncReadExt;

use super::extract::ApiJson;
use crate::accounts::auth::Caller;
use crate::app::state::Controller;
use crate::courses::archive::{self, ArchiveFile};
use crate::error::ActionError;

type Ctl = web::Data<Controller>;
type Reply = Result<HttpResponse, ActionError>;

/// Bytes read at a time from a stored file.
const READ_BYTES: usize = 256 * 1024;
/// A tar block.
const BLOCK: u64 = 512;

pub async fn archive(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<ArchiveCourse>,
) -> Reply {
    Ok(HttpResponse::Accepted()
        .json(archive::archive(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn set_days(
    ctl: Ctl,
    caller: Caller,
    code: web::Path<String>,
    req: ApiJson<CourseArchiveDays>,
) -> Reply {
    Ok(HttpResponse::Ok().json(archive::set_days(&ctl, caller, code.into_inner(), req.0).await?))
}

pub async fn list(ctl: Ctl, caller: Caller, code: web::Path<String>) -> Reply {
    Ok(HttpResponse::Ok().json(archive::list(&ctl, caller, code.into_inner()).await?))
}

/// A stored file's bytes as they are read.
pub fn file_chunks(
    file: tokio::fs::File,
) -> impl futures_util::Stream<Item = std::io::Result<web::Bytes>> {
    futures_util::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; READ_BYTES];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(web::Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

/// Opens a stored archive; one whose row outlived its file is a 404, never a 500.
async fn open(path: &Path) -> Result<(tokio::fs::File, u64), ActionError> {
    match tokio::fs::File::open(path).await {
        Ok(file) => {
            let size = file.metadata().await?.len();
            Ok((file, size))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ActionError::NotFound(
            "the archive's file is no longer in the archive store".into(),
        )),
        Err(e) => Err(e.into()),
    }
}

/// `attachment; filename="NAME"` (the names are course codes and usernames: plain ASCII).
fn attachment(name: &str) -> (header::HeaderName, String) {
    (
        header::CONTENT_DISPOSITION,
        format!("attachment; filename=\"{name}\""),
    )
}

/// One student's archive (their own, or any of the course's for its staff and admins).
pub async fn download(ctl: Ctl, caller: Caller, path: web::Path<(String, String)>) -> Reply {
    let (code, user) = path.into_inner();
    let found = archive::download(&ctl, caller, code, user).await?;
    archive_reply(found).await
}

/// The reply carrying one archive's file, its SHA-256 in `X-Cohort-Sha256`.
pub async fn archive_reply(found: ArchiveFile) -> Reply {
    let (file, size) = open(&found.path).await?;
    let a = &found.archive;
    Ok(HttpResponse::Ok()
        .content_type("application/gzip")
        .insert_header(attachment(&format!("{}-{}.tar.gz", a.course, a.user)))
        .insert_header(("X-Cohort-Sha256", a.sha256.clone()))
        .no_chunking(size)
        .streaming(file_chunks(file)))
}

/// The tar header of one member of the class's tar.
fn member_header(a: &ArchiveFile, size: u64) -> Result<web::Bytes, ActionError> {
    let mut h = tar::Header::new_ustar();
    h.set_path(format!("{}/{}.tar.gz", a.archive.course, a.archive.user))
        .map_err(|e| ActionError::Internal(format!("a class tar member: {e}")))?;
    h.set_size(size);
    h.set_mode(0o644);
    h.set_mtime(a.archive.created_at.timestamp().max(0) as u64);
    h.set_entry_type(tar::EntryType::Regular);
    h.set_cksum();
    Ok(web::Bytes::copy_from_slice(h.as_bytes()))
}

fn padding(size: u64) -> web::Bytes {
    web::Bytes::from(vec![0u8; ((BLOCK - size % BLOCK) % BLOCK) as usize])
}

/// The class's archives as one tar (`<course>/<user>.tar.gz` each), streamed file by file; its
/// length is known ahead from the files' sizes, which cannot change under the open files (an
/// archive is only ever replaced by a rename, never written in place).
pub async fn class(ctl: Ctl, caller: Caller, code: web::Path<String>) -> Reply {
    let code = code.into_inner();
    let files = archive::class(&ctl, caller, code.clone()).await?;
    let mut parts = Vec::new();
    let mut length = 2 * BLOCK;
    for found in files {
        let (file, size) = open(&found.path).await?;
        length += BLOCK + size.div_ceil(BLOCK) * BLOCK;
        let head = futures_util::stream::iter([Ok(member_header(&found, size)?)]);
        let tail = futures_util::stream::iter([Ok(padding(size))]);
        parts.push(head.chain(file_chunks(file)).chain(tail));
    }
    let end = futures_util::stream::iter([Ok(web::Bytes::from(vec![0u8; 2 * BLOCK as usize]))]);
    let body = futures_util::stream::iter(parts).flatten().chain(end);
    Ok(HttpResponse::Ok()
        .content_type("application/x-tar")
        .insert_header(attachment(&format!("{code}-archives.tar")))
        .no_chunking(length)
        .streaming(body))
}
