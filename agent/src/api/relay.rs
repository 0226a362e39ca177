//! `GET /v1/exec-sessions/{op}/websocket?secret=S`: the controller's websocket upgrade is
//! answered with LXD's own (same key, so the same accept), and the two connections are piped
//! together byte for byte until either side ends.

use std::collections::HashMap;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::error::ApiError;
use super::stream::{full, Body};
use crate::node::Node;

pub async fn websocket(
    node: &Node,
    mut req: Request<Incoming>,
    id: &str,
    query: &HashMap<String, String>,
) -> Result<Response<Body>, ApiError> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let upgrading = header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    let key = header("sec-websocket-key")
        .filter(|_| upgrading)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_field",
                "a websocket upgrade is expected",
            )
        })?;
    let secret = query
        .get("secret")
        .ok_or_else(|| ApiError::invalid("secret", "is required"))?;
    let protocol = header("sec-websocket-protocol");
    let lxd = node
        .instances
        .exec_session_socket(id, secret, &key, protocol.as_deref())
        .await?;
    let (accept, lxd_protocol, mut theirs) = (lxd.accept, lxd.protocol, lxd.io);
    let ours = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match ours.await {
            Ok(upgraded) => {
                let mut ours = TokioIo::new(upgraded);
                if let Err(e) = tokio::io::copy_bidirectional(&mut ours, &mut theirs).await {
                    tracing::debug!("exec websocket relay ended: {e}");
                }
            }
            Err(e) => tracing::info!("exec websocket upgrade failed: {e}"),
        }
    });
    let mut resp = Response::new(full(Vec::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(
        "Sec-WebSocket-Accept",
        HeaderValue::from_str(&accept)
            .map_err(|e| ApiError::new(StatusCode::BAD_GATEWAY, "lxd_error", e.to_string()))?,
    );
    if let Some(p) = lxd_protocol
        .as_deref()
        .and_then(|p| HeaderValue::from_str(p).ok())
    {
        h.insert("Sec-WebSocket-Protocol", p);
    }
    Ok(resp)
}
