//! The relay to a container's JupyterLab: `/jupyter/{container}/...` (JupyterLab's `base_url` in
//! the image) on the notebook's own origin ([`super::origin`], which decides who gets here) is
//! relayed, HTTP and websockets alike, through a tunnel the node's agent opens to the
//! container's fixed JupyterLab port over the controller's mutual TLS. No cookie crosses it
//! either way (the browser's pass stays here, and the container's `Set-Cookie` never reaches the
//! browser), nor any `Authorization`: what runs there is whoever is root in the container's.
//! JupyterLab's own XSRF check wants its `_xsrf` cookie echoed in a header; the relay, which
//! takes a change only from the notebook's own origin, makes up that pair for each request.

use std::io;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use http_body_util::{BodyExt, BodyStream, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use actix_web::http::header;
use maud::{html, DOCTYPE};

use crate::agent_client::{AgentError, Tunnel};
use crate::error::ActionError;
use crate::http::portal::i18n::{Lang, Msg};
use crate::instances::notebook::Granted;

/// What the browser sends on, whole or streamed.
/// Not `Send`: the browser's payload stays on the worker's thread.
type UpstreamBody = std::pin::Pin<Box<dyn hyper::body::Body<Data = Bytes, Error = io::Error>>>;

/// Headers that belong to one hop or to one side, never relayed (the upgrade pair is set again
/// for a websocket): cookies stay on their own side.
const HOP_BY_HOP: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "authorization",
    "cookie",
    "set-cookie",
];

/// The header JupyterLab compares with its `_xsrf` cookie on a change.
const XSRF_HEADER: &str = "x-xsrftoken";

pub fn is_websocket(req: &HttpRequest) -> bool {
    req.headers()
        .get("upgrade")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// A browser's page load (a GET navigating to a document), whose HTML answer carries the
/// reclaim banner's script.
fn loads_page(req: &HttpRequest) -> bool {
    let says = |name: &str, value: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == value)
    };
    req.method() == actix_web::http::Method::GET
        && !is_websocket(req)
        && (says("sec-fetch-dest", "document") || says("sec-fetch-mode", "navigate"))
}

/// The upstream request: the browser's method, path and headers, less the hop's and the cookies.
fn upstream_request<B>(req: &HttpRequest, body: B) -> Result<hyper::Request<B>, ActionError> {
    let bad = |e: &dyn std::fmt::Display| ActionError::invalid("request", e.to_string());
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut builder = hyper::Request::builder()
        .method(req.method().as_str())
        .uri(path);
    let page = loads_page(req);
    for (name, value) in req.headers() {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || n == XSRF_HEADER {
            continue;
        }
        // A page comes unencoded, so that the banner's tag can go in (`super::banner`).
        if page && n == "accept-encoding" {
            continue;
        }
        builder = builder.header(n, value.as_bytes());
    }
    let xsrf = hex::encode(rand::random::<[u8; 16]>());
    builder = builder
        .header("cookie", format!("_xsrf={xsrf}"))
        .header(XSRF_HEADER, xsrf);
    if is_websocket(req) {
        builder = builder
            .header("connection", "upgrade")
            .header("upgrade", "websocket");
    }
    builder.body(body).map_err(|e| bad(&e))
}

/// Copies the upstream answer's status and headers (less the hop's) into the browser's answer.
fn answer_head(parts: &http_head::Parts, websocket: bool) -> actix_web::HttpResponseBuilder {
    let status = StatusCode::from_u16(parts.status.as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut builder = HttpResponse::build(status);
    for (name, value) in &parts.headers {
        if HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        builder.append_header((name.as_str(), value.as_bytes()));
    }
    if websocket {
        // The connection type, not a header: actix writes `Connection` from it, and only an
        // upgraded connection's body goes out raw (the websocket's frames as they are).
        builder.upgrade("websocket");
    }
    builder
}

mod http_head {
    pub use hyper::http::response::Parts;
}

/// How long the "starting" answer asks the browser to wait before it tries again.
const RETRY_AFTER_S: u32 = 3;

/// The container runs but JupyterLab in it does not take connections yet (it starts a few
/// seconds after the container, longer on a busy node).
fn not_listening_yet(e: &AgentError) -> bool {
    matches!(e, AgentError::Status { code, .. } if code == "jupyter_unreachable")
}

/// What a browser gets while JupyterLab is starting: 503 with `Retry-After`; a page load gets a
/// page, in the student's language, that loads itself again until JupyterLab answers (as
/// JupyterHub's "your server is starting" page does), instead of an error that stays.
fn starting(req: &HttpRequest, name: &str) -> HttpResponse {
    let navigates = req.method() == actix_web::http::Method::GET
        && !is_websocket(req)
        && req
            .headers()
            .get("sec-fetch-mode")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|m| m == "navigate");
    let lang = Lang::of(req);
    let words = lang.t(Msg::JupyterStarting);
    let mut resp = HttpResponse::ServiceUnavailable();
    resp.insert_header((header::RETRY_AFTER, RETRY_AFTER_S.to_string()))
        .insert_header((header::CACHE_CONTROL, "no-store"));
    if !navigates {
        return resp
            .content_type("text/plain; charset=utf-8")
            .body(format!("{name}: {words}"));
    }
    let page = html! {
        (DOCTYPE)
        html lang=(lang.tag()) {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(RETRY_AFTER_S);
                title { "JupyterLab · " (name) }
            }
            body {
                p #jupyter-starting { (words) }
            }
        }
    };
    resp.content_type("text/html; charset=utf-8")
        .body(page.into_string())
}

/// Relays one browser request to `/jupyter/{name}/...` in a container the caller was granted.
pub async fn relay(
    req: HttpRequest,
    payload: web::Payload,
    name: &str,
    granted: Granted,
) -> Result<HttpResponse, ActionError> {
    let node = granted.instance.node_id.unwrap_or_default().to_string();
    let tunnel: Tunnel = match granted.agent.jupyter_tunnel(name.to_string()).await {
        Ok(tunnel) => tunnel,
        Err(e) if not_listening_yet(&e) => return Ok(starting(&req, name)),
        Err(e) => return Err(ActionError::on_node(node)(e)),
    };
    let websocket = is_websocket(&req);
    let unreachable = |e: &dyn std::fmt::Display| {
        ActionError::Internal(format!("JupyterLab in {name} did not answer: {e}"))
    };
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake::<_, UpstreamBody>(TokioIo::new(tunnel))
            .await
            .map_err(|e| unreachable(&e))?;
    // The connection lives on the worker's thread: the request body is the browser's payload.
    actix_web::rt::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!("jupyter upstream connection ended: {e}");
        }
    });
    if websocket {
        let upstream = upstream_request(
            &req,
            Box::pin(
                http_body_util::Empty::<Bytes>::new()
                    .map_err(|never: std::convert::Infallible| -> io::Error { match never {} }),
            ) as UpstreamBody,
        )?;
        let mut resp = sender
            .send_request(upstream)
            .await
            .map_err(|e| unreachable(&e))?;
        if resp.status() != hyper::StatusCode::SWITCHING_PROTOCOLS {
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Ok(answer_head(&parts, false).body(body));
        }
        let upgraded = hyper::upgrade::on(&mut resp)
            .await
            .map_err(|e| unreachable(&e))?;
        let (parts, _) = resp.into_parts();
        let (from_container, mut to_container) = tokio::io::split(TokioIo::new(upgraded));
        // The browser's frames, as bytes, to the container until either side closes.
        let mut payload = payload.into_inner();
        actix_web::rt::spawn(async move {
            while let Some(Ok(chunk)) = payload.next().await {
                if to_container.write_all(&chunk).await.is_err() {
                    break;
                }
            }
            let _ = to_container.shutdown().await;
        });
        return Ok(answer_head(&parts, true).streaming(read_stream(from_container)));
    }
    let body: UpstreamBody = Box::pin(StreamBody::new(payload.into_inner().map(|chunk| {
        chunk
            .map(Frame::data)
            .map_err(|e| io::Error::other(e.to_string()))
    })));
    let upstream = upstream_request(&req, body)?;
    let resp = sender
        .send_request(upstream)
        .await
        .map_err(|e| unreachable(&e))?;
    let (parts, body) = resp.into_parts();
    if loads_page(&req) && bannered(&parts) {
        let page = body
            .collect()
            .await
            .map_err(|e| unreachable(&e))?
            .to_bytes();
        if let Some(with_tag) = super::banner::inject(&page) {
            let mut answer = answer_head(&parts, false).body(with_tag);
            // The length is the page's with the tag now.
            answer.headers_mut().remove(header::CONTENT_LENGTH);
            return Ok(answer);
        }
        return Ok(answer_head(&parts, false).body(page));
    }
    let chunks = BodyStream::new(body).filter_map(|frame| async move {
        match frame {
            Ok(frame) => frame.into_data().ok().map(Ok),
            Err(e) => Some(Err(io::Error::other(e))),
        }
    });
    Ok(answer_head(&parts, false).streaming(chunks))
}

/// Whether an answer is an HTML page small enough (by its `Content-Length`) and unencoded, so
/// that the banner's tag can go in; anything else is relayed as it streams.
fn bannered(parts: &http_head::Parts) -> bool {
    let text = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_ascii_lowercase)
    };
    let html = text("content-type").is_some_and(|t| t.starts_with("text/html"));
    let plain = text("content-encoding").is_none_or(|e| e == "identity");
    let small = text("content-length")
        .and_then(|l| l.parse::<usize>().ok())
        .is_some_and(|l| l <= super::banner::MOST_BYTES);
    html && plain && small
}

/// What the container sends on a websocket, as chunks of bytes until it closes.
fn read_stream<R: tokio::io::AsyncRead + Unpin + 'static>(
    reader: R,
) -> impl futures_util::Stream<Item = io::Result<Bytes>> {
    stream::unfold(reader, |mut reader| async move {
        let mut buf = vec![0u8; 16 << 10];
        match reader.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), reader))
            }
            Err(e) => Some((Err(e), reader)),
        }
    })
}
