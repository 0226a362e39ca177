//! A small Cohort fleet for end-to-end tests: a `cohort-controller` process made with `init`,
//! an HTTPS client for its API, and real `cohort-agent` processes enrolled with join tokens,
//! each working in a [`TestLxd`] project.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cohort_proto::api::nodes::JoinTokenIssued;
use cohort_proto::api::operations::{Operation, OperationStatus};
use serde_json::json;

use crate::controller::controller_binary;
use crate::images::base_tarball;
use crate::TestLxd;

/// Runs `cohort-controller init` and returns the admin token it printed once.
pub fn init(db_url: &str, state: &Path) -> String {
    let out = std::process::Command::new(controller_binary())
        .args(["init", "--admin", "admin"])
        .env("DATABASE_URL", db_url)
        .env("COHORT_STATE_DIR", state)
        .output()
        .expect("run init");
    assert!(
        out.status.success(),
        "init failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("admin token (shown once): "))
        .expect("init prints the admin token")
        .to_string()
}

/// The controller's API over HTTPS, trusting only its CA.
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
}

impl Api {
    pub fn new(state: &Path, port: u16) -> Self {
        let ca = std::fs::read(state.join("ca.crt")).expect("CA");
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA PEM"))
            .timeout(Duration::from_secs(600))
            .build()
            .expect("client");
        Api {
            client,
            base: format!("https://127.0.0.1:{port}/api/v1"),
        }
    }

    /// A call that must succeed, decoded.
    pub async fn call<T: serde::de::DeserializeOwned>(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> T {
        let mut req = self
            .client
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status();
        let text = resp.text().await.expect("body");
        assert!(status.is_success(), "{method} {path}: {status}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"))
    }

    /// Waits for the operation to end and asserts it succeeded.
    pub async fn wait(&self, token: &str, op: &Operation) -> Operation {
        let path = format!("/operations/{}/wait?timeout=300", op.id);
        let done: Operation = self.call(token, reqwest::Method::GET, &path, None).await;
        assert_eq!(done.status, OperationStatus::Success, "{done:#?}");
        done
    }

    /// Uploads the base image tarball as `alias`.
    pub async fn import_base_image(
        &self,
        token: &str,
        alias: &str,
    ) -> cohort_proto::api::images::Image {
        let tarball = tokio::fs::read(base_tarball()).await.expect("read tarball");
        let resp = self
            .client
            .post(format!("{}/images?alias={alias}", self.base))
            .bearer_auth(token)
            .body(tarball)
            .send()
            .await
            .expect("upload");
        assert_eq!(
            resp.status(),
            201,
            "{}",
            resp.text().await.unwrap_or_default()
        );
        resp.json().await.expect("image")
    }
}

/// A `cohort-agent serve` process enrolled with a join token from the controller.
pub struct EnrolledAgent {
    pub addr: SocketAddr,
    pub state: tempfile::TempDir,
    config_path: PathBuf,
    child: Option<std::process::Child>,
}

impl EnrolledAgent {
    /// Gets a join token for `name` as `admin`, enrolls (`cohort_agent::enroll::join`, what
    /// `cohort-agent join` runs), and serves on `addr` in `lxd`'s project with SSH ports
    /// `ssh_ports`.
    pub async fn enroll(
        api: &Api,
        admin: &str,
        name: &str,
        lxd: &TestLxd,
        addr: SocketAddr,
        ssh_ports: (u16, u16),
    ) -> Self {
        let issued: JoinTokenIssued = api
            .call(
                admin,
                reqwest::Method::POST,
                "/nodes/tokens",
                Some(json!({"node_name": name, "addresses": [addr.ip().to_string()]})),
            )
            .await;
        let state = tempfile::tempdir().expect("agent state");
        let opts = cohort_agent::enroll::JoinOptions {
            state_dir: state.path().to_path_buf(),
            listen: addr,
            agent_url: format!("https://{addr}"),
            ssh_host: addr.ip().to_string(),
            ssh_port_first: ssh_ports.0,
            ssh_port_last: ssh_ports.1,
            lxd_project: Some(lxd.project().to_string()),
            storage_pool: None,
            lxd_socket: Some(lxd.daemon().socket_path().into()),
        };
        let mut config = cohort_agent::enroll::join(&issued.token, &opts)
            .await
            .expect("agent joins");
        config.ssh_listen = addr.ip().to_string();
        let config_path = config.config_path();
        std::fs::write(&config_path, config.to_toml()).expect("write agent config");
        let mut agent = EnrolledAgent {
            addr,
            state,
            config_path,
            child: None,
        };
        agent.start().await;
        agent
    }

    /// Starts `cohort-agent serve` (again) and waits for its port.
    pub async fn start(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.state.path().join("agent.log"))
            .expect("agent log");
        let child = std::process::Command::new(crate::controller::built_binary("cohort-agent"))
            .args(["serve", "--config"])
            .arg(&self.config_path)
            .env("LXD_DIR", crate::lxd::lxd_dir())
            // Tests that want a node network make one of their own (`TestNetwork`).
            .env("COHORT_AGENT_NETWORK_MODE", "none")
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("start cohort-agent");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(90);
        while tokio::net::TcpStream::connect(self.addr).await.is_err() {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || std::time::Instant::now() > deadline {
                let log = std::fs::read_to_string(self.state.path().join("agent.log"))
                    .unwrap_or_default();
                panic!(
                    "the agent is not listening on {} ({exited:?}):\n{log}",
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `kill -9`.
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for EnrolledAgent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
