//! The HTTP side of the LXD client: one request function, `?project=` on every call, and the
//! percent-encoding of every name and query value; async answers are waited for
//! ([`super::operations`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::header::{HeaderMap, CONTENT_TYPE};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use hyperlocal::UnixConnector;
use serde_json::Value;

use super::envelope::{Answer, Envelope, LxdError};

/// Largest body read back from LXD (file pulls, exec output, listings).
const MAX_BODY: usize = 256 * 1024 * 1024;
/// How often a change LXD refused because the instance was busy is asked for (about 5 s in all).
const BUSY_ATTEMPTS: u32 = 5;

/// A connection to one LXD daemon, scoped to one project.
#[derive(Clone)]
pub struct Lxd {
    http: Client<UnixConnector, LxdBody>,
    socket: PathBuf,
    project: String,
    /// Deadline for operations whose caller gives none.
    pub default_timeout: Duration,
}

/// A request body for LXD: bytes in memory, or a file streamed from disk ([`file_body`]).
pub type LxdBody = BoxBody<Bytes, std::io::Error>;

/// A body of bytes already in memory.
pub fn full(bytes: Bytes) -> LxdBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// A file's contents as a body, read in 256 KiB chunks as LXD takes them: an image tarball
/// goes to LXD without ever being whole in memory.
pub fn file_body(file: tokio::fs::File) -> LxdBody {
    use tokio::io::AsyncReadExt;
    let chunks = futures_util::stream::unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(hyper::body::Frame::data(Bytes::from(buf))), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    StreamBody::new(chunks).boxed()
}

/// A file (or exec log) LXD is sending: the headers that describe it and its body, not read yet.
pub struct RawStream {
    pub headers: HeaderMap,
    pub body: hyper::body::Incoming,
}

impl RawStream {
    /// The length LXD declared, if it did.
    pub fn length(&self) -> Option<u64> {
        self.headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    }
}

/// A file (or exec log) read from LXD with the headers that describe it.
pub struct RawFile {
    pub headers: HeaderMap,
    pub bytes: Bytes,
}

/// Percent-encodes a query value or path segment (everything but RFC 3986 unreserved bytes).
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A request body as JSON; every body type of the client serialises.
pub(super) fn to_json<T: serde::Serialize>(body: &T) -> Value {
    serde_json::to_value(body).expect("an LXD request body serialises")
}

impl Lxd {
    pub fn new(socket: &Path, project: &str) -> Self {
        // No idle connections kept: LXD ties some work to a request's context, which ends only
        // when the connection closes; a pooled connection after `recursion=2` left later stops
        // hanging until the agent exited.
        let http = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(UnixConnector);
        Lxd {
            http,
            socket: socket.to_path_buf(),
            project: project.to_string(),
            default_timeout: Duration::from_secs(300),
        }
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The same daemon, not scoped to a project: for the listings across every project
    /// (`all-projects=true`), which LXD refuses together with `project=`.
    pub(super) fn unscoped(&self) -> Lxd {
        Lxd {
            project: String::new(),
            ..self.clone()
        }
    }

    /// `path` with `project=` added to its query (unless unscoped).
    pub(super) fn url(&self, path: &str) -> String {
        if self.project.is_empty() {
            return path.to_string();
        }
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{path}{sep}project={}", encode(&self.project))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: LxdBody,
        limit: usize,
    ) -> Result<(u16, HeaderMap, Bytes), LxdError> {
        let uri: hyper::Uri = hyperlocal::Uri::new(&self.socket, &self.url(path)).into();
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let req = req.body(body).map_err(|e| LxdError::Decode {
            what: path.to_string(),
            detail: e.to_string(),
        })?;
        let unreachable = |message: String| LxdError::Unreachable {
            socket: self.socket.display().to_string(),
            message,
        };
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| unreachable(format!("{e:#}")))?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = Limited::new(resp.into_body(), limit)
            .collect()
            .await
            .map_err(|e| unreachable(e.to_string()))?
            .to_bytes();
        Ok((status, headers, bytes))
    }

    pub(super) async fn answer(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
    ) -> Result<Answer, LxdError> {
        Ok(self
            .answer_with_headers(method, path, headers, full(body))
            .await?
            .0)
    }

    /// An answer with the response's headers (for `ETag`).
    async fn answer_with_headers(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, String)],
        body: LxdBody,
    ) -> Result<(Answer, HeaderMap), LxdError> {
        let what = format!("{method} {path}");
        let (status, resp_headers, bytes) =
            self.send(method, path, headers, body, MAX_BODY).await?;
        let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|e| LxdError::Decode {
            what: what.clone(),
            detail: format!(
                "{e}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ),
        })?;
        Ok((envelope.into_answer(&what, status)?, resp_headers))
    }

    /// A sync GET's metadata and its `ETag`, for a `PUT` with `If-Match`.
    pub(super) async fn get_with_etag(
        &self,
        path: &str,
    ) -> Result<(Value, Option<String>), LxdError> {
        let (answer, headers) = self
            .answer_with_headers(Method::GET, path, &[], full(Bytes::new()))
            .await?;
        let etag = headers
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match answer {
            Answer::Sync(v) => Ok((v, etag)),
            Answer::Async { .. } => Err(LxdError::Decode {
                what: format!("GET {path}"),
                detail: "answered async".into(),
            }),
        }
    }

    /// A `PUT` that LXD applies only if the object still has `etag`; waits when async.
    pub(super) async fn put_if_match(
        &self,
        path: &str,
        body: &Value,
        etag: Option<&str>,
    ) -> Result<Value, LxdError> {
        let mut headers = vec![(CONTENT_TYPE.as_str(), "application/json".to_string())];
        if let Some(etag) = etag {
            headers.push(("If-Match", etag.to_string()));
        }
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON value serialises"));
        let what = format!("PUT {path}");
        match self.answer(Method::PUT, path, &headers, bytes).await? {
            Answer::Sync(v) => Ok(v),
            Answer::Async { operation, .. } => {
                self.wait(&operation, &what, self.default_timeout).await
            }
        }
    }

    /// One call with a JSON body; an async answer is waited for (up to `timeout`) and its
    /// operation metadata returned.
    pub(super) async fn call_within(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, LxdError> {
        let bytes = match body {
            Some(v) => Bytes::from(serde_json::to_vec(v).expect("JSON value serialises")),
            None => Bytes::new(),
        };
        let headers = [(CONTENT_TYPE.as_str(), "application/json".to_string())];
        let what = format!("{method} {path}");
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = match self
                .answer(method.clone(), path, &headers, bytes.clone())
                .await?
            {
                Answer::Sync(v) => Ok(v),
                Answer::Async { operation, .. } => self.wait(&operation, &what, timeout).await,
            };
            // LXD 5.0.2 holds an instance's operation lock a moment after the operation that took
            // it has answered (a stop's clean-up, for one) and refuses the next change meanwhile
            // ("Instance is busy running a "stop" operation") before doing any of it: asked again.
            match result {
                Err(e)
                    if attempt < BUSY_ATTEMPTS
                        && e.lxd_message()
                            .is_some_and(|m| m.contains("is busy running")) =>
                {
                    tracing::debug!(what, attempt, "the instance is busy; asking again");
                    tokio::time::sleep(Duration::from_millis(500 * attempt as u64)).await;
                }
                other => return other,
            }
        }
    }

    /// One call with a typed body (see [`Lxd::call`]).
    pub(super) async fn send_json<T: serde::Serialize>(
        &self,
        method: Method,
        path: &str,
        body: &T,
    ) -> Result<Value, LxdError> {
        self.call(method, path, Some(&to_json(body))).await
    }

    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, LxdError> {
        self.call_within(method, path, body, self.default_timeout)
            .await
    }

    pub(super) async fn get(&self, path: &str) -> Result<Value, LxdError> {
        self.call(Method::GET, path, None).await
    }

    /// Decodes a sync answer's metadata into `T`.
    pub(super) async fn get_as<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<T, LxdError> {
        let v = self.get(path).await?;
        serde_json::from_value(v).map_err(|e| LxdError::Decode {
            what: format!("GET {path}"),
            detail: e.to_string(),
        })
    }

    /// GET of a raw body (file contents, exec logs); LXD's error envelope when it fails.
    pub(super) async fn get_raw(&self, path: &str) -> Result<RawFile, LxdError> {
        self.get_raw_within(path, MAX_BODY).await
    }

    /// [`Lxd::get_raw`] reading at most `limit` bytes (image exports are larger than files).
    pub(super) async fn get_raw_within(
        &self,
        path: &str,
        limit: usize,
    ) -> Result<RawFile, LxdError> {
        let (status, headers, bytes) = self
            .send(Method::GET, path, &[], full(Bytes::new()), limit)
            .await?;
        if status >= 300 {
            return Err(Self::raw_error(path, status, &bytes));
        }
        Ok(RawFile { headers, bytes })
    }

    /// A GET whose body is handed over unread (a file pull, an exec log), so that it can be
    /// streamed on; an error answer is read (bounded) for its message.
    pub(super) async fn get_stream(&self, path: &str) -> Result<RawStream, LxdError> {
        let uri: hyper::Uri = hyperlocal::Uri::new(&self.socket, &self.url(path)).into();
        let req = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .body(full(Bytes::new()))
            .map_err(|e| LxdError::Decode {
                what: path.to_string(),
                detail: e.to_string(),
            })?;
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| LxdError::Unreachable {
                socket: self.socket.display().to_string(),
                message: format!("{e:#}"),
            })?;
        let status = resp.status().as_u16();
        if status >= 300 {
            let bytes = Limited::new(resp.into_body(), 64 * 1024)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            return Err(Self::raw_error(path, status, &bytes));
        }
        let (parts, body) = resp.into_parts();
        Ok(RawStream {
            headers: parts.headers,
            body,
        })
    }

    /// POST of a raw body with extra headers (file push, image upload); waits when async.
    pub(super) async fn post_raw(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: Bytes,
        timeout: Duration,
    ) -> Result<Value, LxdError> {
        self.post_stream(path, headers, full(body), timeout).await
    }

    /// POST of a streamed body (an image tarball from disk); waits when async.
    pub(super) async fn post_stream(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: LxdBody,
        timeout: Duration,
    ) -> Result<Value, LxdError> {
        let what = format!("POST {path}");
        let (answer, _) = self
            .answer_with_headers(Method::POST, path, headers, body)
            .await?;
        match answer {
            Answer::Sync(v) => Ok(v),
            Answer::Async { operation, .. } => self.wait(&operation, &what, timeout).await,
        }
    }

    fn raw_error(path: &str, status: u16, bytes: &[u8]) -> LxdError {
        let message = serde_json::from_slice::<Envelope>(bytes)
            .map(|e| e.error)
            .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned());
        LxdError::Api {
            what: format!("GET {path}"),
            status,
            message,
        }
    }
}
