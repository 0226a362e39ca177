//! A local HTTPS server on 127.0.0.1 with a fresh rcgen certificate, for the pinning tests: it
//! answers `/api/v1/me` with a user and everything else with the controller's 404 error body.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::TlsAcceptor;

pub struct TlsServer {
    pub url: String,
    /// The certificate it presents (DER).
    pub cert: Vec<u8>,
}

const ME: &str = r#"{"user":{"username":"alice","role":"admin","full_name":null,"email":null,"created_at":"2026-11-22T13:00:00Z"},"instances":[],"ssh_keys":[]}"#;
const NOT_FOUND: &str =
    r#"{"error":{"code":"not_found","message":"Instance not found","field":"name"}}"#;

/// Starts the server on a thread of its own (so tests may run it from sync code).
pub fn start() -> TlsServer {
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("params");
    let cert = params.self_signed(&key).expect("self-signed");
    let der = cert.der().to_vec();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(der.clone())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .expect("server config");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    std_listener.set_nonblocking(true).expect("nonblocking");
    let port = std_listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async move {
            let listener = TcpListener::from_std(std_listener).expect("listener");
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // Clients that refuse the certificate end the handshake: nothing to serve.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = vec![0u8; 8192];
                    let mut len = 0;
                    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf[len..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => len += n,
                        }
                    }
                    let request = String::from_utf8_lossy(&buf[..len]);
                    let path = request.split_whitespace().nth(1).unwrap_or("");
                    let (status, body) = if path == "/api/v1/me" {
                        ("200 OK", ME)
                    } else {
                        ("404 Not Found", NOT_FOUND)
                    };
                    let response = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = tls.write_all(response.as_bytes()).await;
                    let _ = tls.shutdown().await;
                });
            }
        });
    });
    TlsServer {
        url: format!("https://127.0.0.1:{port}"),
        cert: der,
    }
}
