//! Calls that leave an LXD operation running for the caller to attach to: starting one without
//! waiting for it (an exec with `wait-for-websocket`), and opening one of its websockets as a
//! raw upgraded connection, which the agent pipes to the controller unread (the websocket
//! framing is LXD's and the far client's, end to end).

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, UPGRADE};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;

use super::envelope::{Answer, Envelope, LxdError};
use super::Lxd;

/// One of an operation's websockets, upgraded: LXD's `Sec-WebSocket-Accept` (derived from the
/// key the far client sent, passed through) and the connection.
pub struct OperationSocket {
    pub accept: String,
    pub protocol: Option<String>,
    pub io: TokioIo<hyper::upgrade::Upgraded>,
}

impl Lxd {
    /// A call answered with an operation that is not waited for: the operation's id and the
    /// operation object (its `metadata` holds what the caller needs to attach).
    pub(super) async fn start(
        &self,
        path: &str,
        body: &Value,
    ) -> Result<(String, Value), LxdError> {
        let what = format!("POST {path}");
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON value serialises"));
        let headers = [(CONTENT_TYPE.as_str(), "application/json".to_string())];
        match self.answer(Method::POST, path, &headers, bytes).await? {
            Answer::Async { metadata, .. } => {
                let id = metadata["id"].as_str().unwrap_or_default().to_string();
                if id.is_empty() {
                    return Err(LxdError::Decode {
                        what,
                        detail: "operation without an id".into(),
                    });
                }
                Ok((id, metadata))
            }
            Answer::Sync(_) => Err(LxdError::Decode {
                what,
                detail: "answered sync, an operation was expected".into(),
            }),
        }
    }

    /// Opens `/1.0/operations/{id}/websocket?secret=S` on a connection of its own, with the far
    /// client's `Sec-WebSocket-Key` (and protocol), and hands the upgraded connection over.
    pub async fn operation_socket(
        &self,
        id: &str,
        secret: &str,
        key: &str,
        protocol: Option<&str>,
    ) -> Result<OperationSocket, LxdError> {
        let what = format!("websocket of operation {id}");
        let unreachable = |message: String| LxdError::Unreachable {
            socket: self.socket().display().to_string(),
            message,
        };
        let stream = tokio::net::UnixStream::connect(self.socket())
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(async move {
            if let Err(e) = conn.with_upgrades().await {
                tracing::debug!("LXD websocket connection ended: {e}");
            }
        });
        let path = format!(
            "{}/websocket?secret={}",
            super::operations::operation_url(id),
            super::client::encode(secret)
        );
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(self.url(&path))
            .header(HOST, "lxd")
            .header(CONNECTION, "Upgrade")
            .header(UPGRADE, "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", key);
        if let Some(protocol) = protocol {
            req = req.header("Sec-WebSocket-Protocol", protocol);
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| LxdError::Decode {
                what: what.clone(),
                detail: e.to_string(),
            })?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
            let status = resp.status().as_u16();
            let bytes = Limited::new(resp.into_body(), 64 * 1024)
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let message = serde_json::from_slice::<Envelope>(&bytes)
                .map(|e| e.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            return Err(LxdError::Api {
                what,
                status,
                message,
            });
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let accept = header("Sec-WebSocket-Accept").ok_or_else(|| LxdError::Decode {
            what: what.clone(),
            detail: "no Sec-WebSocket-Accept".into(),
        })?;
        let protocol = header("Sec-WebSocket-Protocol");
        let upgraded = hyper::upgrade::on(resp)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(OperationSocket {
            accept,
            protocol,
            io: TokioIo::new(upgraded),
        })
    }
}
