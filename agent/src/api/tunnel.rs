//! The controller's only way to a container's JupyterLab: `GET /v1/instances/{name}/jupyter`
//! with `Upgrade: cohort-tunnel` is answered `101 Switching Protocols`, and from then on the
//! connection is a byte pipe to the container's own address on the node network, port
//! [`JUPYTER_PORT`], and nowhere else: the port is fixed here, never taken from the request, so
//! nothing else in the container is reachable this way. The controller speaks HTTP (and
//! websockets) to JupyterLab through it.

use std::net::Ipv4Addr;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONNECTION, UPGRADE};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::error::ApiError;
use super::stream::{full, Body};
use crate::node::Node;

pub use crate::instances::activity::jupyter::JUPYTER_PORT;
/// The protocol the controller asks to switch to.
pub const PROTOCOL: &str = "cohort-tunnel";
/// Longest wait for JupyterLab to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens the pipe to `name`'s JupyterLab, or says why not: not running (409), no address on
/// the node network (409), JupyterLab not answering (502).
pub async fn jupyter(
    node: &Node,
    name: &str,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let asked = req
        .headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
    if !asked {
        return Err(ApiError::invalid(
            "Upgrade",
            format!("the header must ask for {PROTOCOL}"),
        ));
    }
    let instance = node.instances.instance(name).await?;
    if instance.status != "Running" {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_running",
            format!("{name} is {}", instance.status),
        ));
    }
    let address: Ipv4Addr = instance
        .address
        .as_deref()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "no_address",
                format!("{name} has no address on the node network"),
            )
        })?;
    let upstream =
        tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((address, JUPYTER_PORT)))
            .await
            .map_err(|_| "timed out".to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "jupyter_unreachable",
                    format!("JupyterLab in {name} ({address}:{JUPYTER_PORT}): {e}"),
                )
            })?;
    let name = name.to_string();
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                let mut upstream = upstream;
                if let Err(e) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
                    tracing::debug!(instance = %name, "jupyter tunnel ended: {e}");
                }
            }
            Err(e) => tracing::info!(instance = %name, "jupyter tunnel not upgraded: {e}"),
        }
    });
    let mut resp = Response::new(full(Vec::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static(PROTOCOL));
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    Ok(resp)
}
