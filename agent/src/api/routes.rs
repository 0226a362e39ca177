//! Routing: each request is parsed (path, query, body) and handed to one `Node` method; the
//! answer is JSON, raw bytes or 204, and every error is an `ApiError`.

use std::collections::HashMap;

use bytes::Bytes;
use cohort_proto::agent::{
    Arrival, AttachGpus, CreateInstance, CreateSnapshot, ExecRequest, ExecSessionRequest,
    IdentityCsr, ImportImage, InstallCertificate, LiveLimits, NetworkPolicy, PublishInstance,
    SshAccess, StateChange, UpdateInstance,
};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::{refused, ApiError};
use super::stream::{self, full, Body};
use crate::identity::Identity;
use crate::node::Node;

/// Largest JSON body, file and image accepted.
const MAX_JSON: usize = 4 * 1024 * 1024;
const MAX_FILE: usize = 256 * 1024 * 1024;
const MAX_IMAGE: usize = 4 * 1024 * 1024 * 1024;
/// Most exec output (stdout and stderr together) sent when the controller names no limit.
const MAX_EXEC_OUTPUT: u64 = 64 * 1024 * 1024;
/// The controller's limit for what an answer streams back (a file pulled, an exec's output):
/// the agent refuses more than it with a 413 before streaming, and stops past it.
const LIMIT_HEADER: &str = "X-Cohort-Limit";

type Answer = Result<Response<Body>, ApiError>;

pub async fn handle(node: &Node, identity: &Identity, req: Request<Incoming>) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let answer = route(node, identity, req).await;
    match answer {
        Ok(resp) => resp,
        Err(e) => {
            tracing::info!(%method, %path, status = e.status.as_u16(), "{}", e.message);
            json(e.status, &e.body())
        }
    }
}

async fn route(node: &Node, identity: &Identity, req: Request<Incoming>) -> Answer {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query: HashMap<String, String> =
        url::form_urlencoded::parse(req.uri().query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    use Method as M;
    match (&method, segs.as_slice()) {
        (&M::GET, ["v1", "health"]) => ok(&node.health()),
        (&M::GET, ["v1", "inventory"]) => ok(&node.inventory().await?),
        (&M::GET, ["v1", "metrics"]) => super::metrics::render(node).await,
        (&M::GET, ["v1", "identity"]) => ok(&identity.info()),
        (&M::POST, ["v1", "identity", "csr"]) => ok(&IdentityCsr {
            csr_pem: identity.prepare()?,
        }),
        (&M::PUT, ["v1", "identity", "certificate"]) => {
            let body: InstallCertificate = read_json(req).await?;
            ok(&identity.install(&body.certificate_pem)?)
        }
        (&M::GET, ["v1", "instances"]) => match query.get("brief").map(String::as_str) {
            None | Some("false") => ok(&node.instances.instances().await?),
            Some("true") => ok(&node.instances.instances_brief().await?),
            Some(other) => Err(ApiError::invalid(
                "brief",
                format!("must be true or false, not '{other}'"),
            )),
        },
        (&M::POST, ["v1", "instances"]) => {
            let body: CreateInstance = read_json(req).await?;
            created(&node.instances.create_instance(&body).await?)
        }
        (&M::GET, ["v1", "instances", name]) => ok(&node.instances.instance(name).await?),
        (&M::DELETE, ["v1", "instances", name]) => {
            node.instances
                .delete_instance(name)
                .await
                .map_err(super::error::delete_refused)?;
            no_content()
        }
        (&M::PATCH, ["v1", "instances", name]) => {
            let body: UpdateInstance = read_json(req).await?;
            ok(&node
                .instances
                .update_instance(name, &body)
                .await
                .map_err(|e| refused("config", e))?)
        }
        (&M::POST, ["v1", "instances", name, "export"]) => {
            tarball(node.instances.export_instance(name).await?)
        }
        (&M::POST, ["v1", "instances", name, "import"]) => {
            let body = crate::instances::streamed(req.into_body());
            node.instances.import_instance(name, body).await?;
            no_content()
        }
        (&M::PUT, ["v1", "instances", name, "arrival"]) => {
            let body: Arrival = read_json(req).await?;
            ok(&node.instances.arrive(name, &body).await?)
        }
        (&M::POST, ["v1", "volumes", name, "export"]) => {
            tarball(node.instances.export_volume(name).await?)
        }
        (&M::POST, ["v1", "volumes", name, "archive"]) => {
            let chunks = node.instances.archive_volume(name).await?;
            let mut resp = Response::new(stream::archive(chunks));
            octet_stream(resp.headers_mut(), None);
            Ok(resp)
        }
        (&M::POST, ["v1", "volumes", name, "import"]) => {
            let body = crate::instances::streamed(req.into_body());
            node.instances.import_volume(name, body).await?;
            no_content()
        }
        (&M::PUT, ["v1", "instances", name, "gpus"]) => {
            let body: AttachGpus = read_json(req).await?;
            ok(&node.instances.attach_gpus(name, &body).await?)
        }
        (&M::POST, ["v1", "instances", name, "gpus", "detach"]) => {
            ok(&node.instances.detach_gpus(name).await?)
        }
        (&M::POST, ["v1", "instances", name, "publish"]) => {
            let body: PublishInstance = read_json(req).await?;
            let published = node.instances.publish_instance(name, &body).await?;
            let mut resp = Response::new(full(published.tarball));
            let h = resp.headers_mut();
            octet_stream(h, None);
            h.insert("X-Cohort-Fingerprint", header_value(published.fingerprint));
            Ok(resp)
        }
        (&M::PUT, ["v1", "instances", name, "state"]) => {
            let body: StateChange = read_json(req).await?;
            ok(&node.instances.change_state(name, &body).await?)
        }
        (&M::POST, ["v1", "instances", name, "exec"]) => {
            let limit = limit(&req, MAX_EXEC_OUTPUT)?;
            let body: ExecRequest = read_json(req).await?;
            let out = node.instances.exec(name, &body, limit).await?;
            let mut resp = Response::new(stream::exec(out, limit));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(resp)
        }
        (&M::POST, ["v1", "instances", name, "exec-sessions"]) => {
            let body: ExecSessionRequest = read_json(req).await?;
            created(&node.instances.start_exec_session(name, &body).await?)
        }
        (&M::GET, ["v1", "exec-sessions", id]) => {
            let timeout = match query.get("timeout") {
                Some(t) => t
                    .parse()
                    .map_err(|_| ApiError::invalid("timeout", "must be whole seconds"))?,
                None => 0,
            };
            ok(&node.instances.exec_session_state(id, timeout).await?)
        }
        (&M::GET, ["v1", "exec-sessions", id, "websocket"]) => {
            let id = id.to_string();
            super::relay::websocket(node, req, &id, &query).await
        }
        (&M::GET, ["v1", "instances", name, "lxd-state"]) => {
            ok(&node.instances.lxd_state(name).await?)
        }
        (&M::GET, ["v1", "lxd-states"]) => ok(&node.instances.lxd_states().await?),
        (&M::GET, ["v1", "instances", name, "console-log"]) => {
            let log = node.instances.console_log(name).await?;
            let mut resp = Response::new(full(log));
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok(resp)
        }
        (&M::GET, ["v1", "instances", name, "activity"]) => {
            let cpu_percent = match query.get("cpu_percent") {
                Some(p) => p.parse().map_err(|_| {
                    ApiError::invalid("cpu_percent", "must be a whole percent of one core")
                })?,
                None => cohort_proto::activity::DEFAULT_CPU_PERCENT,
            };
            ok(&node.instances.activity(name, cpu_percent).await?)
        }
        (&M::GET, ["v1", "instances", name, "jupyter"]) => {
            super::tunnel::jupyter(node, name, req).await
        }
        (&M::PUT, ["v1", "instances", name, "ssh"]) => {
            let body: SshAccess = read_json(req).await?;
            ok(&node.instances.set_ssh(name, &body).await?)
        }
        (&M::PUT, ["v1", "instances", name, "limits"]) => {
            let body: LiveLimits = read_json(req).await?;
            ok(&node.instances.set_limits(name, &body).await?)
        }
        (&M::PUT, ["v1", "instances", name, "network-policy"]) => {
            let body: NetworkPolicy = read_json(req).await?;
            ok(&node.instances.set_network_policy(name, &body).await?)
        }
        (&M::GET, ["v1", "instances", name, "files"]) => {
            let limit = limit(&req, MAX_FILE as u64)?;
            let file = node
                .instances
                .pull_file_stream(name, file_path(&query)?, limit)
                .await?;
            let (mode, uid, gid, length) = (file.mode, file.uid, file.gid, file.body.length());
            let mut resp = Response::new(stream::file(file, limit));
            let h = resp.headers_mut();
            octet_stream(h, length);
            h.insert("X-Cohort-Mode", header_value(format!("{mode:04o}")));
            h.insert("X-Cohort-Uid", header_value(uid.to_string()));
            h.insert("X-Cohort-Gid", header_value(gid.to_string()));
            Ok(resp)
        }
        (&M::PUT, ["v1", "instances", name, "files"]) => {
            let target = file_path(&query)?.to_string();
            let mode = header_num(&req, "X-Cohort-Mode", 8)?.unwrap_or(0o644);
            let uid = header_num(&req, "X-Cohort-Uid", 10)?.unwrap_or(0);
            let gid = header_num(&req, "X-Cohort-Gid", 10)?.unwrap_or(0);
            let bytes = read_bytes(req, MAX_FILE).await?;
            node.instances
                .push_file(name, &target, bytes, mode, uid, gid)
                .await
                .map_err(|e| refused("path", e))?;
            no_content()
        }
        (&M::GET, ["v1", "instances", name, "snapshots"]) => {
            ok(&node.instances.snapshots(name).await?)
        }
        (&M::POST, ["v1", "instances", name, "snapshots"]) => {
            let body: CreateSnapshot = read_json(req).await?;
            created(
                &node
                    .instances
                    .create_snapshot(name, &body.name)
                    .await
                    .map_err(|e| refused("name", e))?,
            )
        }
        (&M::POST, ["v1", "instances", name, "snapshots", snap, "restore"]) => {
            node.instances
                .restore_snapshot(name, snap)
                .await
                .map_err(|e| refused("snapshot", e))?;
            no_content()
        }
        (&M::POST, ["v1", "instances", name, "snapshots", snap]) => {
            let body: CreateSnapshot = read_json(req).await?;
            ok(&node
                .instances
                .rename_snapshot(name, snap, &body.name)
                .await
                .map_err(|e| refused("name", e))?)
        }
        (&M::DELETE, ["v1", "instances", name, "snapshots", snap]) => {
            node.instances
                .delete_snapshot(name, snap)
                .await
                .map_err(|e| refused("snapshot", e))?;
            no_content()
        }
        (&M::POST, ["v1", "instances", name, "home", "restore"]) => {
            let body: cohort_proto::agent::RestoreHome = read_json(req).await?;
            node.instances.restore_home(name, &body).await?;
            no_content()
        }
        (&M::POST, ["v1", "instances", name, "home", "restore-path"]) => {
            let body: cohort_proto::agent::RestoreHomePath = read_json(req).await?;
            node.instances.restore_home_path(name, &body).await?;
            no_content()
        }
        (&M::GET, ["v1", "volumes", name, "snapshots"]) => {
            ok(&node.instances.home_snapshots(name).await?)
        }
        (&M::PUT, ["v1", "volumes", name, "snapshot-schedule"]) => {
            let body: cohort_proto::agent::HomeSnapshotSchedule = read_json(req).await?;
            node.instances
                .set_home_snapshots(name, body.schedule)
                .await?;
            no_content()
        }
        (&M::DELETE, ["v1", "volumes", name]) => {
            node.instances.delete_volume(name).await?;
            no_content()
        }
        (&M::POST, ["v1", "datasets"]) => {
            let body: cohort_proto::agent::ImportDataset = read_json(req).await?;
            node.instances.import_dataset(&body).await?;
            no_content()
        }
        (&M::POST, ["v1", "datasets", "prune"]) => {
            let body: cohort_proto::agent::PruneDatasets = read_json(req).await?;
            ok(&node.instances.prune_datasets(&body).await?)
        }
        (&M::PUT, ["v1", "instances", name, "datasets"]) => {
            let body: cohort_proto::agent::InstanceDatasets = read_json(req).await?;
            node.instances.set_datasets(name, &body).await?;
            no_content()
        }
        (&M::GET, ["v1", "images"]) => ok(&node.images.images().await?),
        (&M::DELETE, ["v1", "images", fingerprint]) => {
            node.images.delete_image(fingerprint).await?;
            no_content()
        }
        (&M::POST, ["v1", "images"]) => {
            let is_json = req
                .headers()
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
            if is_json {
                let body: ImportImage = read_json(req).await?;
                created(&node.images.import_image(&body).await?)
            } else {
                let alias = req
                    .headers()
                    .get("X-Cohort-Alias")
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| ApiError::invalid("X-Cohort-Alias", "header is required"))?
                    .to_string();
                let bytes = read_bytes(req, MAX_IMAGE).await?;
                created(&node.images.upload_image(&alias, bytes).await?)
            }
        }
        _ => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no route for {method} {path}"),
        )),
    }
}

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let body = serde_json::to_vec(value).expect("API types serialise");
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn ok<T: Serialize>(value: &T) -> Answer {
    Ok(json(StatusCode::OK, value))
}

fn created<T: Serialize>(value: &T) -> Answer {
    Ok(json(StatusCode::CREATED, value))
}

fn no_content() -> Answer {
    let mut resp = Response::new(full(Bytes::new()));
    *resp.status_mut() = StatusCode::NO_CONTENT;
    Ok(resp)
}

/// A backup's tarball, streamed as LXD sends it; its backup goes once the stream is dropped.
fn tarball(export: crate::instances::Export) -> Answer {
    let length = export.tarball.length();
    let mut resp = Response::new(stream::backup(export));
    octet_stream(resp.headers_mut(), length);
    Ok(resp)
}

/// Marks a reply as bytes (a tarball, a file), with its length when it is known ahead.
fn octet_stream(h: &mut hyper::HeaderMap, length: Option<u64>) {
    if let Some(length) = length {
        h.insert(
            hyper::header::CONTENT_LENGTH,
            header_value(length.to_string()),
        );
    }
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
}

fn header_value(s: String) -> HeaderValue {
    HeaderValue::from_str(&s).expect("digits are a valid header value")
}

fn file_path(query: &HashMap<String, String>) -> Result<&str, ApiError> {
    query
        .get("path")
        .map(String::as_str)
        .ok_or_else(|| ApiError::invalid("path", "query parameter path is required"))
}

/// The controller's limit for this answer, at most `most`.
fn limit(req: &Request<Incoming>, most: u64) -> Result<u64, ApiError> {
    Ok(header_num64(req, LIMIT_HEADER)?.map_or(most, |l| l.min(most)))
}

fn header_num64(req: &Request<Incoming>, name: &str) -> Result<Option<u64>, ApiError> {
    match req.headers().get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Some)
            .ok_or_else(|| ApiError::invalid(name, "must be a number")),
    }
}

fn header_num(req: &Request<Incoming>, name: &str, radix: u32) -> Result<Option<u32>, ApiError> {
    match req.headers().get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| u32::from_str_radix(s, radix).ok())
            .map(Some)
            .ok_or_else(|| ApiError::invalid(name, "must be a number")),
    }
}

async fn read_bytes(req: Request<Incoming>, limit: usize) -> Result<Bytes, ApiError> {
    Limited::new(req.into_body(), limit)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_body",
                format!("request body unreadable or larger than {limit} bytes: {e}"),
            )
        })
}

async fn read_json<T: DeserializeOwned>(req: Request<Incoming>) -> Result<T, ApiError> {
    let bytes = read_bytes(req, MAX_JSON).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            format!("request body: {e}"),
        )
    })
}
