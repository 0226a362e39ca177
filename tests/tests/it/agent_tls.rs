//! Only the controller gets in: the agent's mutual-TLS API accepts a client certificate from the
//! Cohort CA with the controller role, and refuses no certificate, another CA's, an expired one
//! and an agent's (node role) own. The other way round, the agent's image downloads accept only
//! a server with the controller role, never another node.

use cohort_e2e::agent::{Leaf, TestAgent, TestCa};
use cohort_e2e::TestLxd;
use cohort_proto::agent::Health;

async fn health(
    agent: &TestAgent,
    client: &reqwest::Client,
) -> Result<reqwest::Response, reqwest::Error> {
    client.get(agent.url("/v1/health")).send().await
}

/// The agent refuses `identity` with one of the TLS alerts in `want` (e.g. `CertificateExpired`),
/// and an HTTPS request made with it fails too.
async fn refused(agent: &TestAgent, identity: Option<&Leaf>, case: &str, want: &[&str]) {
    match agent.handshake(identity).await {
        Ok(()) => panic!("{case}: the agent accepted the connection"),
        Err(why) => assert!(
            want.iter()
                .any(|w| why.contains(&format!("AlertReceived({w})"))),
            "{case}: refused, but not with {want:?}: {why}"
        ),
    }
    if let Ok(resp) = health(agent, &agent.client_with(identity)).await {
        panic!(
            "{case}: the agent answered an HTTPS request with {}",
            resp.status()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_controller_certificates_from_the_cohort_ca_are_accepted() {
    let lxd = TestLxd::new();
    let agent = TestAgent::start(&lxd).await;

    let resp = health(&agent, &agent.controller())
        .await
        .expect("controller is accepted");
    assert_eq!(resp.status(), 200);
    let h: Health = resp.json().await.expect("health JSON");
    assert_eq!(h.node_name, "node-test");
    assert_eq!(h.lxd_project, lxd.project());
    assert!(h.lxd_version.starts_with('5'), "{}", h.lxd_version);

    refused(&agent, None, "no certificate", &["CertificateRequired"]).await;

    let foreign = TestCa::new("Some other CA");
    let stranger = foreign.controller();
    refused(
        &agent,
        Some(&stranger),
        "foreign CA",
        &["CertificateRequired", "UnknownCA", "BadCertificate"],
    )
    .await;

    let expired = agent
        .ca
        .leaf("cohort-controller", cohort_proto::ROLE_CONTROLLER, true);
    refused(&agent, Some(&expired), "expired", &["CertificateExpired"]).await;

    let node = agent.ca.leaf("node-other", cohort_proto::ROLE_NODE, false);
    refused(&agent, Some(&node), "node role", &["AccessDenied"]).await;

    // The probe itself accepts what the agent accepts, and the controller still gets in after
    // the refusals.
    agent
        .handshake(Some(&agent.ca.controller()))
        .await
        .expect("controller is accepted by the raw TLS probe");
    let again = health(&agent, &agent.controller())
        .await
        .expect("controller again");
    assert_eq!(again.status(), 200);
}

/// An HTTPS server on 127.0.0.1 presenting `leaf`, answering every request with `body`; counts
/// the requests it answered.
async fn image_server(
    leaf: &cohort_e2e::agent::Leaf,
    body: &'static [u8],
) -> (
    u16,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let certs = cohort_agent::tls::certs_from_pem("leaf", leaf.cert_pem.as_bytes()).expect("cert");
    let key = cohort_agent::tls::key_from_pem("leaf", leaf.key_pem.as_bytes()).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    let task = tokio::spawn(async move {
        // Bounded: the test makes one request per server.
        for _ in 0..4 {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut tls) = acceptor.accept(tcp).await else {
                continue;
            };
            let mut request = [0u8; 4096];
            let _ = tls.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = tls.write_all(head.as_bytes()).await;
            let _ = tls.write_all(body).await;
            let _ = tls.shutdown().await;
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    (port, served, task)
}

/// A stolen node key must not pass for the controller: the agent's image download refuses a
/// server presenting a node's certificate (same CA, valid for the address) before sending
/// anything, and accepts the controller's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_downloads_refuse_a_server_with_a_nodes_certificate() {
    use cohort_agent::images::ImageError;
    use cohort_proto::agent::ImportImage;

    let lxd = TestLxd::new();
    let state = tempfile::tempdir().expect("agent state");
    let dir = state.path().to_path_buf();
    let agent = TestAgent::start_with(&lxd, move |config| config.state_dir = dir).await;
    let own = agent.ca.leaf("node-test", cohort_proto::ROLE_NODE, false);
    let config = &agent.node.config;
    std::fs::write(config.key_path(), &own.key_pem).expect("key");
    std::fs::write(config.cert_path(), &own.cert_pem).expect("cert");
    std::fs::write(config.ca_path(), agent.ca.pem()).expect("CA");

    const BODY: &[u8] = b"not really a tarball";
    let import = |port: u16| ImportImage {
        url: format!("https://127.0.0.1:{port}/api/v1/images/x/tarball"),
        alias: "stolen/image".into(),
        // Not the body's SHA-256: a download that gets through ends at the fingerprint check.
        fingerprint: "00".repeat(32),
    };

    let other_node = agent.ca.leaf("node-other", cohort_proto::ROLE_NODE, false);
    let (port, served, task) = image_server(&other_node, BODY).await;
    match agent.node.import_image(&import(port)).await {
        // Refused in the handshake: the server never answered a request (counted below).
        Err(ImageError::Download { .. }) => {}
        other => panic!("a node's certificate passed for the controller: {other:?}"),
    }
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 0);
    task.abort();

    let controller = agent.ca.controller();
    let (port, served, task) = image_server(&controller, BODY).await;
    match agent.node.import_image(&import(port)).await {
        Err(ImageError::Invalid { field, .. }) => assert_eq!(field, "fingerprint"),
        other => panic!("the controller's certificate was not accepted: {other:?}"),
    }
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
    task.abort();
}
