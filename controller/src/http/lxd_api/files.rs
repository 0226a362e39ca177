//! `GET` and `POST /1.0/instances/{name}/files?path=…` (`lxc file pull|push`): a regular file
//! through the same actions as `/api/v1/instances/{name}/files`, with LXD's `X-LXD-*` headers
//! for owner, mode and type translated to and from Cohort's.

use actix_web::{web, HttpRequest, HttpResponse};
use serde_json::json;

use super::instances::in_project;
use super::reply::{sync, LxdError, LxdReply};
use super::{caller_of, Ctl, LxdClient};
use crate::agent_client::FileMeta;
use crate::error::ActionError;
use crate::http::api::FileBody;
use crate::instances::io;

/// The `path` of the query (the client adds `project` beside it). LXD takes a path relative
/// to `/`, and `lxc file pull NAME/etc/hosts` sends `etc/hosts`.
fn path_of(req: &HttpRequest) -> Result<String, LxdError> {
    let path = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(key, _)| key == "path")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(|| LxdError::BadRequest("Missing path argument".into()))?;
    Ok(if path.starts_with('/') {
        path
    } else {
        format!("/{path}")
    })
}

fn header<'r>(req: &'r HttpRequest, name: &str) -> Option<&'r str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// A mode as Go's `ParseInt(value, 0)` reads `X-LXD-mode`: octal with a leading `0`, decimal
/// without (the client sends `%04o`, so octal in practice).
fn parse_lxd_mode(raw: &str) -> Option<u32> {
    match raw.strip_prefix("0o").or_else(|| raw.strip_prefix('0')) {
        Some("") => Some(0),
        Some(octal) => u32::from_str_radix(octal, 8).ok(),
        None => raw.parse().ok(),
    }
}

/// The mode as the client must read it: octal with a leading `0` whatever the special bits
/// (Cohort's header is bare octal, which `ParseInt(…, 0)` would take for decimal at `4755`).
fn lxd_mode(cohort: &str) -> Option<String> {
    u32::from_str_radix(cohort, 8)
        .ok()
        .map(|mode| format!("0{mode:o}"))
}

/// `lxc file pull`: the file's bytes with `X-LXD-uid|gid|mode|type`.
pub async fn get(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
) -> LxdReply {
    let name = name.into_inner();
    let path = path_of(&req)?;
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    in_project(&ctl, client, name.clone(), &req).await?;
    let file = io::get_file(&ctl, caller, name, path).await?;
    let mut reply = HttpResponse::Ok();
    reply
        .content_type("application/octet-stream")
        .insert_header(("X-LXD-type", "file"));
    let FileMeta { mode, uid, gid } = file.meta;
    if let Some(mode) = mode.as_deref().and_then(lxd_mode) {
        reply.insert_header(("X-LXD-mode", mode));
    }
    for (name, value) in [("X-LXD-uid", uid), ("X-LXD-gid", gid)] {
        if let Some(value) = value {
            reply.insert_header((name, value));
        }
    }
    if let Some(length) = file.length {
        reply.no_chunking(length);
    }
    Ok(reply.streaming(file.body))
}

/// `lxc file push`: a regular file, overwritten whole. Directories, symlinks (`-r`, `-p`,
/// `file create`) and appending are not offered by Cohort's file action, so they are refused
/// rather than half done.
pub async fn post(
    ctl: Ctl,
    client: LxdClient,
    name: web::Path<String>,
    req: HttpRequest,
    body: Result<FileBody, ActionError>,
) -> LxdReply {
    let name = name.into_inner();
    let path = path_of(&req)?;
    match header(&req, "X-LXD-type").unwrap_or("file") {
        "file" => {}
        other => return Err(LxdError::not_supported(format!("pushing a {other}"))),
    }
    match header(&req, "X-LXD-write").unwrap_or("overwrite") {
        "overwrite" => {}
        other => return Err(LxdError::not_supported(format!("{other} writes of files"))),
    }
    let mode = match header(&req, "X-LXD-mode").filter(|m| !m.is_empty()) {
        Some(raw) => Some(
            parse_lxd_mode(raw)
                .filter(|m| *m <= 0o7777)
                .ok_or_else(|| LxdError::BadRequest(format!("Invalid mode {raw:?}")))?,
        ),
        None => None,
    };
    let owner = |h: &str| -> Result<Option<String>, LxdError> {
        match header(&req, h) {
            // The client sends -1 for "keep the default".
            None | Some("-1") => Ok(None),
            Some(raw) => raw
                .parse::<u32>()
                .map(|id| Some(id.to_string()))
                .map_err(|_| LxdError::BadRequest(format!("Invalid {h} {raw:?}"))),
        }
    };
    let meta = FileMeta {
        mode: mode.map(|m| format!("{m:o}")),
        uid: owner("X-LXD-uid")?,
        gid: owner("X-LXD-gid")?,
    };
    let body = body?;
    let caller = caller_of(&ctl, LxdClient(client.0.clone())).await?;
    in_project(&ctl, client, name.clone(), &req).await?;
    io::put_file(&ctl, caller, name, path, body.0.to_vec(), meta).await?;
    Ok(sync(json!({})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_go_reads_them_and_written_with_a_leading_zero() {
        assert_eq!(parse_lxd_mode("0640"), Some(0o640));
        assert_eq!(parse_lxd_mode("0"), Some(0));
        assert_eq!(parse_lxd_mode("420"), Some(0o644));
        assert_eq!(parse_lxd_mode("0o755"), Some(0o755));
        assert_eq!(parse_lxd_mode("09"), None);
        assert_eq!(lxd_mode("4755").as_deref(), Some("04755"));
        assert_eq!(lxd_mode("0644").as_deref(), Some("0644"));
        assert_eq!(lxd_mode("x"), None);
    }
}
