//! Running a real agent in a test: a throw-away PKI made with rcgen (the Cohort CA, a foreign
//! CA, controller-role, node-role and expired leaves) and [`TestAgent`], the agent's API served
//! in-process over mutual TLS on a loopback port, working in a [`TestLxd`] project.

use std::net::SocketAddr;
use std::sync::Arc;

use cohort_agent::{AgentConfig, Node};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::TestLxd;

/// A certificate authority made for one test.
pub struct TestCa {
    cert: Certificate,
    key: KeyPair,
}

/// A leaf certificate with its key, both PEM.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Leaf {
    /// Certificate and key in one PEM buffer, as `reqwest::Identity::from_pem` takes them.
    pub fn identity_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.key_pem)
    }
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).expect("self-sign CA");
        TestCa { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A client+server leaf with Subject CN `cn` and OU `role`, valid for 127.0.0.1/localhost;
    /// `expired` makes one that ran out in 2021.
    pub fn leaf(&self, cn: &str, role: &str, expired: bool) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut p = CertificateParams::new(vec![
            "127.0.0.1".to_string(),
            "localhost".to_string(),
            cn.to_string(),
        ])
        .expect("leaf params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.distinguished_name
            .push(DnType::OrganizationalUnitName, role);
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        if expired {
            p.not_before = rcgen::date_time_ymd(2020, 1, 1);
            p.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = p.signed_by(&key, &self.cert, &self.key).expect("sign leaf");
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    /// A leaf with the controller role.
    pub fn controller(&self) -> Leaf {
        self.leaf("cohort-controller", cohort_proto::ROLE_CONTROLLER, false)
    }
}

/// An agent serving its API on 127.0.0.1 over mutual TLS for one test's LXD project.
pub struct TestAgent {
    pub ca: TestCa,
    pub addr: SocketAddr,
    pub node: Arc<Node>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl TestAgent {
    /// Starts an agent in `lxd`'s project; call from inside a multi-threaded tokio runtime.
    pub async fn start(lxd: &TestLxd) -> Self {
        Self::start_with(lxd, |_| {}).await
    }

    /// Like `start`, with a chance to change the config first.
    pub async fn start_with(lxd: &TestLxd, adjust: impl FnOnce(&mut AgentConfig)) -> Self {
        let ca = TestCa::new("Cohort test CA");
        let agent_leaf = ca.leaf("node-test", cohort_proto::ROLE_NODE, false);
        let mut config = AgentConfig::new("node-test");
        config.lxd_socket = Some(lxd.daemon().socket_path().into());
        config.lxd_project = lxd.project().to_string();
        config.listen = "127.0.0.1:0".parse().expect("address");
        config.ssh_listen = "127.0.0.1".into();
        // No node network unless the test makes one (`TestNetwork::configure`).
        config.network.mode = cohort_agent::network::NetworkMode::None;
        adjust(&mut config);
        let identity = Arc::new(
            cohort_agent::identity::Identity::in_memory(&agent_leaf.cert_pem, &agent_leaf.key_pem)
                .expect("agent identity"),
        );
        let tls = cohort_agent::tls::server_config(identity.clone(), ca.pem().as_bytes())
            .expect("agent TLS config");
        let node = Arc::new(Node::connect(config).await.expect("agent connects to LXD"));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind agent port");
        let addr = listener.local_addr().expect("local addr");
        let server = tokio::spawn(cohort_agent::api::serve(
            listener,
            Arc::new(tls),
            identity,
            node.clone(),
        ));
        TestAgent {
            ca,
            addr,
            node,
            server,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    /// An HTTPS client that trusts the test CA and presents `identity` (PEM cert + key), if any.
    pub fn client_with(&self, identity: Option<&Leaf>) -> reqwest::Client {
        let mut b = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(
                reqwest::Certificate::from_pem(self.ca.pem().as_bytes()).expect("CA PEM"),
            )
            .timeout(std::time::Duration::from_secs(600));
        if let Some(leaf) = identity {
            b = b.identity(
                reqwest::Identity::from_pem(leaf.identity_pem().as_bytes()).expect("identity"),
            );
        }
        b.build().expect("HTTP client")
    }

    /// Opens one TLS connection to the agent as `identity` (or with no certificate) and waits
    /// for the agent's verdict on it: `Ok` if the agent kept the connection after the handshake,
    /// otherwise the error rustls reported, e.g. `AlertReceived(UnknownCA)`.
    ///
    /// In TLS 1.3 the client finishes its side of the handshake before the server has looked at
    /// its certificate, so an HTTP client may already be writing its request when the alert
    /// arrives and report a cancelled request instead. Reading here, before anything is sent,
    /// always sees the alert.
    pub async fn handshake(&self, identity: Option<&Leaf>) -> Result<(), String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut self.ca.pem().as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("CA into roots");
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some(leaf) => {
                let certs = rustls_pemfile::certs(&mut leaf.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("leaf PEM");
                let key = rustls_pemfile::private_key(&mut leaf.key_pem.as_bytes())
                    .expect("key PEM")
                    .expect("a key");
                builder
                    .with_client_auth_cert(certs, key)
                    .expect("client identity")
            }
        };
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("TCP to the agent");
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("server name");
        let mut tls = match connector.connect(name, tcp).await {
            Ok(tls) => tls,
            Err(e) => return Err(rustls_error(e)),
        };
        // Say nothing and listen: a refusal arrives as an alert, an acceptance as silence.
        let mut first = [0u8; 1];
        match tokio::time::timeout(std::time::Duration::from_secs(5), tls.read(&mut first)).await {
            Ok(Err(e)) => return Err(rustls_error(e)),
            Ok(Ok(0)) => return Err("the agent closed the connection without an alert".into()),
            Ok(Ok(_)) => return Err("the agent spoke before it was asked".into()),
            Err(_silence) => {}
        }
        let answer = async {
            tls.write_all(
                b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
            )
            .await?;
            let mut answer = Vec::new();
            tls.read_to_end(&mut answer).await?;
            Ok::<_, std::io::Error>(answer)
        };
        match tokio::time::timeout(std::time::Duration::from_secs(30), answer).await {
            Err(_) => Err("the agent kept the connection but did not answer within 30 s".into()),
            Ok(Err(e)) => Err(rustls_error(e)),
            Ok(Ok(answer)) if answer.starts_with(b"HTTP/1.1 200") => Ok(()),
            Ok(Ok(answer)) => Err(format!(
                "the agent answered: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(200)])
            )),
        }
    }

    /// The controller's client: the only one the agent accepts.
    pub fn controller(&self) -> reqwest::Client {
        self.client_with(Some(&self.ca.controller()))
    }
}

/// The rustls error inside an I/O error from a TLS stream, e.g. `AlertReceived(UnknownCA)`.
fn rustls_error(e: std::io::Error) -> String {
    match e.get_ref() {
        Some(inner) => format!("{inner:?}"),
        None => format!("{e:?}"),
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The row of `check` in `cohort-agent doctor`'s table, with the lines its cells wrap over
/// joined again (cell by cell, with a space), or `None` when no row names it.
pub fn doctor_row(table: &str, check: &str) -> Option<String> {
    let cells = |line: &str| -> Vec<String> {
        // Outer borders `│`, inner ones `┆` (comfy-table's UTF8_FULL_CONDENSED).
        line.trim()
            .trim_matches('│')
            .split(['│', '┆'])
            .map(|c| c.trim().to_string())
            .collect()
    };
    let lines: Vec<&str> = table.lines().filter(|l| l.starts_with('│')).collect();
    let start = lines
        .iter()
        .position(|l| cells(l).first().is_some_and(|c| c.contains(check)))?;
    let mut joined = cells(lines[start]);
    for line in &lines[start + 1..] {
        let more = cells(line);
        if more.first().is_some_and(|c| !c.is_empty()) || more.len() != joined.len() {
            break;
        }
        for (cell, piece) in joined.iter_mut().zip(more) {
            if !piece.is_empty() {
                cell.push(' ');
                cell.push_str(&piece);
            }
        }
    }
    Some(joined.join(" │ "))
}
