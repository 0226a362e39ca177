//! A scripted daemon on a unix socket for unit tests: it answers each request with the next
//! answer of its script and records the request lines it got, so a test drives the client
//! through answers a real daemon gives only under load or on failure.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixListener;

use super::Lxd;

/// What the daemon answers, in order: (HTTP status, envelope), and the request lines it got.
pub(crate) struct Script {
    pub answers: Mutex<VecDeque<(u16, Value)>>,
    pub asked: Mutex<Vec<String>>,
}

/// A daemon that answers each request with the script's next answer, then closes.
pub(crate) async fn daemon(answers: Vec<(u16, Value)>) -> (Lxd, Arc<Script>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a socket directory");
    let socket = dir.path().join("unix.socket");
    let listener = UnixListener::bind(&socket).expect("bind the scripted daemon");
    let script = Arc::new(Script {
        answers: Mutex::new(answers.into()),
        asked: Mutex::new(Vec::new()),
    });
    let served = script.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&head)
                .lines()
                .next()
                .unwrap_or_default()
                .to_string();
            served.asked.lock().unwrap().push(line);
            let (status, body) = served
                .answers
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or((500, json!({"type": "error", "error": "script ran out"})));
            let body = body.to_string();
            let reply = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        }
    });
    (Lxd::new(&socket, ""), script, dir)
}

pub(crate) fn error(status: u16, message: &str) -> (u16, Value) {
    (
        status,
        json!({"type": "error", "error": message, "error_code": status}),
    )
}

/// A sync answer carrying `metadata`.
pub(crate) fn sync(metadata: Value) -> (u16, Value) {
    (200, json!({"type": "sync", "metadata": metadata}))
}
