//! `Cluster`: a whole Cohort deployment on this machine, all real processes. A
//! `cohort-controller` (its own database and state dir) and N `cohort-agent`s, each enrolled with
//! a join token exactly as an admin would (`cohort-agent join`), each in its own LXD project
//! with its own SSH port range. Processes can be killed (-9) and restarted; everything goes on
//! `Drop`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::controller::{controller_binary, ControllerProcess};
use crate::{PortRange, TestDb, TestLxd};

/// The `cohort-agent` binary, built once per test process.
pub fn agent_binary() -> PathBuf {
    crate::controller::built_binary("cohort-agent")
}

/// One enrolled node: its agent process, LXD project and SSH port range.
pub struct ClusterNode {
    pub name: String,
    pub lxd: TestLxd,
    pub ssh_ports: PortRange,
    pub agent_port: u16,
    pub state_dir: PathBuf,
    child: Option<Child>,
}

impl ClusterNode {
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.state_dir.join("agent.log"))
            .expect("agent log");
        let child = Command::new(agent_binary())
            .args(["serve", "--config"])
            .arg(self.state_dir.join("agent.toml"))
            .env("COHORT_LOG", "info,cohort_agent=debug")
            // Tests that want a node network make one of their own (`TestNetwork`).
            .env("COHORT_AGENT_NETWORK_MODE", "none")
            // The daemon is the one `join` wrote into agent.toml (LXD, or Incus beside it):
            // nothing from this process's environment overrides it.
            .env_remove("COHORT_AGENT_LXD_SOCKET")
            .stdout(Stdio::from(log.try_clone().expect("log fd")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start cohort-agent");
        self.child = Some(child);
        wait_listening(self.agent_port, &self.state_dir.join("agent.log"));
    }

    /// `kill -9` the agent.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state_dir.join("agent.log")).unwrap_or_default()
    }

    /// The agent's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        self.kill();
    }
}

fn wait_listening(port: u16, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    panic!("nothing listens on 127.0.0.1:{port} after 30 s; log:\n{text}");
}

pub struct Cluster {
    /// The per-test database, unless the cluster runs on a database URL of the test's own.
    pub db: Option<TestDb>,
    pub db_url: String,
    /// Extra environment of every controller start (configuration).
    controller_env: Vec<(String, String)>,
    pub state: tempfile::TempDir,
    pub controller: ControllerProcess,
    pub admin_token: String,
    pub nodes: Vec<ClusterNode>,
    /// Ports for the controller (0) and the agents (1..).
    ports: PortRange,
    http: reqwest::Client,
}

impl Cluster {
    /// A controller and `nodes` enrolled agents named `node1`, `node2`, ..., all online.
    pub async fn start(nodes: usize) -> Self {
        Self::start_with_env(nodes, &[]).await
    }

    /// Like `start`, with extra environment for the controller.
    pub async fn start_with_env(nodes: usize, controller_env: &[(&str, &str)]) -> Self {
        Self::start_configured(nodes, None, controller_env).await
    }

    /// Like [`Cluster::start`] on the (empty) database at `db_url`, e.g. a
    /// [`crate::pg::PrivatePg`]'s; `cohort-controller init` migrates it.
    pub async fn start_with_database(nodes: usize, db_url: &str) -> Self {
        Self::start_on(nodes, None, db_url.to_string(), &[]).await
    }

    /// Like [`Cluster::start`] (or on `db_url` when given), the controller always started with
    /// `env` (configuration, e.g. `COHORT_CPU_OVERCOMMIT`).
    pub async fn start_configured(
        nodes: usize,
        db_url: Option<&str>,
        env: &[(&str, &str)],
    ) -> Self {
        match db_url {
            Some(url) => Self::start_on(nodes, None, url.to_string(), env).await,
            None => {
                let db = TestDb::new();
                let url = db.url().to_string();
                Self::start_on(nodes, Some(db), url, env).await
            }
        }
    }

    /// A controller with no nodes that agents on other hosts reach at `address` (a test
    /// network's address on this host: see [`crate::lab`]); the test still talks to it on
    /// loopback. Its certificate names `address`, and join tokens carry its URL there.
    pub async fn start_reachable_at(address: std::net::Ipv4Addr, env: &[(&str, &str)]) -> Self {
        let ports = PortRange::claim();
        let port = ports.port(0);
        let listen = format!("0.0.0.0:{port}");
        let public = format!("https://{address}:{port}");
        let names = address.to_string();
        let mut all = vec![
            ("COHORT_LISTEN", listen.as_str()),
            ("COHORT_PUBLIC_URL", public.as_str()),
            ("COHORT_SERVER_NAMES", names.as_str()),
        ];
        all.extend_from_slice(env);
        let db = TestDb::new();
        let url = db.url().to_string();
        Self::start_with_ports(0, Some(db), url, &all, ports).await
    }

    async fn start_on(
        nodes: usize,
        db: Option<TestDb>,
        db_url: String,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_with_ports(nodes, db, db_url, env, PortRange::claim()).await
    }

    async fn start_with_ports(
        nodes: usize,
        db: Option<TestDb>,
        db_url: String,
        env: &[(&str, &str)],
        ports: PortRange,
    ) -> Self {
        let state = tempfile::tempdir().expect("cluster state dir");
        let controller_dir = state.path().join("controller");
        std::fs::create_dir_all(&controller_dir).expect("controller dir");
        let out = Command::new(controller_binary())
            .arg("init")
            .env("DATABASE_URL", &db_url)
            .env("COHORT_STATE_DIR", &controller_dir)
            .env("COHORT_LISTEN", format!("127.0.0.1:{}", ports.port(0)))
            // The configuration the server runs with (the certificate's names, say).
            .envs(env.iter().copied())
            .output()
            .expect("run cohort-controller init");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "cohort-controller init failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let admin_token = stdout
            .lines()
            .find_map(|l| l.strip_prefix("admin token (shown once): "))
            .expect("init prints the admin token")
            .trim()
            .to_string();
        let controller = ControllerProcess::start(&db_url, &controller_dir, ports.port(0), env);
        let ca = std::fs::read(controller_dir.join("ca.crt")).expect("controller CA");
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("CA pem"))
            .timeout(Duration::from_secs(120))
            .build()
            .expect("http client");
        let mut cluster = Cluster {
            db,
            db_url,
            controller_env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            state,
            controller,
            admin_token,
            nodes: Vec::new(),
            ports,
            http,
        };
        for i in 1..=nodes {
            cluster.add_node(&format!("node{i}")).await;
        }
        cluster
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.controller.url())
    }

    /// A request with a bearer token.
    pub fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
    ) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(token)
    }

    /// `GET` a path outside `/api/v1` (`/healthz`) without a token; its body.
    pub async fn get_plain(&self, path: &str) -> String {
        let res = self
            .http
            .get(format!("{}{path}", self.controller.url()))
            .send()
            .await
            .expect("controller answers");
        assert!(res.status().is_success(), "GET {path}: {}", res.status());
        res.text().await.expect("body")
    }

    /// `GET /metrics` as Prometheus would, with `token` (the metrics token or an admin's).
    pub async fn scrape(&self, token: &str) -> String {
        let res = self
            .http
            .get(format!("{}/metrics", self.controller.url()))
            .bearer_auth(token)
            .send()
            .await
            .expect("controller answers");
        assert!(res.status().is_success(), "GET /metrics: {}", res.status());
        res.text().await.expect("body")
    }

    /// An admin request; panics unless the answer is 2xx; returns its JSON (or Null).
    pub async fn admin(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut req = self.request(method.clone(), path, &self.admin_token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let res = req.send().await.expect("controller answers");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Enrolls one more node: join token from the API, `cohort-agent join`, then `serve`.
    pub async fn add_node(&mut self, name: &str) -> &mut ClusterNode {
        self.add_node_in(name, TestLxd::new()).await
    }

    /// [`Cluster::add_node`] working in the given project (e.g. one with its own images, or one
    /// on Incus: the agent then drives Incus).
    pub async fn add_node_in(&mut self, name: &str, lxd: TestLxd) -> &mut ClusterNode {
        let ssh_ports = PortRange::claim();
        let agent_port = self.ports.port(1 + self.nodes.len() as u16);
        let mut node = ClusterNode {
            name: name.to_string(),
            lxd,
            ssh_ports,
            agent_port,
            state_dir: self.state.path().join(name),
            child: None,
        };
        self.join(&node).await;
        node.spawn();
        self.nodes.push(node);
        self.wait_node_state(name, "online", Duration::from_secs(30))
            .await;
        self.nodes.last_mut().expect("just pushed")
    }

    /// Joins node `index` again with a new token (same state directory, address, ports and LXD
    /// project: how a node whose certificate expired comes back) and restarts its agent.
    pub async fn join_again(&mut self, index: usize) {
        self.nodes[index].kill();
        self.join(&self.nodes[index]).await;
        self.nodes[index].spawn();
    }

    /// `cohort-agent join` for `node` with a join token the admin issues for loopback.
    async fn join(&self, node: &ClusterNode) {
        let issued = self
            .admin(
                reqwest::Method::POST,
                "/nodes/tokens",
                // The agent is reached on loopback: the admin names that address.
                Some(json!({"node_name": node.name, "addresses": ["127.0.0.1"]})),
            )
            .await;
        let token = issued["token"].as_str().expect("join token").to_string();
        let out = Command::new(agent_binary())
            .arg("join")
            .arg(&token)
            .arg("--state-dir")
            .arg(&node.state_dir)
            .args(["--listen", &format!("127.0.0.1:{}", node.agent_port)])
            .args([
                "--agent-url",
                &format!("https://127.0.0.1:{}", node.agent_port),
            ])
            .args(["--ssh-host", "127.0.0.1"])
            .args([
                "--ssh-ports",
                &format!("{}-{}", node.ssh_ports.first(), node.ssh_ports.last()),
            ])
            .args(["--lxd-project", node.lxd.project()])
            // The daemon its project is on, pinned in its config as every join pins it.
            .args(["--lxd-socket", &node.lxd.daemon().socket_path()])
            .output()
            .expect("run cohort-agent join");
        assert!(
            out.status.success(),
            "cohort-agent join failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Polls `GET /nodes/{name}` until its state is `state`.
    pub async fn wait_node_state(&self, name: &str, state: &str, within: Duration) {
        let deadline = Instant::now() + within;
        let mut last = Value::Null;
        while Instant::now() < deadline {
            last = self
                .admin(reqwest::Method::GET, &format!("/nodes/{name}"), None)
                .await;
            if last["state"] == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        panic!("node {name} did not become {state} within {within:?}: {last}");
    }

    /// Uploads the base image tarball `scripts/setup` built, under `alias`.
    pub async fn import_base_image(&self, alias: &str) -> Value {
        let tarball = std::fs::read_dir("/var/cache/cohort")
            .expect("image cache (run scripts/setup)")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("cohort-base-") && n.ends_with(".tar.gz"))
            })
            .expect("a cohort-base tarball in /var/cache/cohort");
        let bytes = tokio::fs::read(&tarball).await.expect("read tarball");
        let res = self
            .request(
                reqwest::Method::POST,
                &format!("/images?alias={alias}"),
                &self.admin_token,
            )
            .body(bytes)
            .send()
            .await
            .expect("upload image");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        assert!(status.is_success(), "image import: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Creates a user with `role` and returns an API token for them.
    pub async fn user(&self, username: &str, role: &str) -> String {
        self.admin(
            reqwest::Method::POST,
            "/users",
            Some(json!({"username": username, "role": role})),
        )
        .await;
        self.token_for(username).await
    }

    pub async fn token_for(&self, username: &str) -> String {
        let issued = self
            .admin(
                reqwest::Method::POST,
                &format!("/users/{username}/tokens"),
                Some(json!({})),
            )
            .await;
        issued["token"].as_str().expect("token").to_string()
    }

    /// Waits for an operation to end; returns it.
    pub async fn wait_operation(&self, id: &str, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let op = self
                .admin(
                    reqwest::Method::GET,
                    &format!("/operations/{id}/wait?timeout=10"),
                    None,
                )
                .await;
            let status = op["status"].as_str().unwrap_or_default();
            if ["success", "failure", "cancelled"].contains(&status) {
                return op;
            }
            assert!(
                Instant::now() < deadline,
                "operation {id} still {status} after {within:?}: {op}"
            );
        }
    }

    /// Starts `POST /courses/{code}/provision` as `token`; panics unless it is accepted (202).
    /// Returns the operation's id.
    pub async fn start_provision(&self, code: &str, token: &str) -> String {
        let res = self
            .request(
                reqwest::Method::POST,
                &format!("/courses/{code}/provision"),
                token,
            )
            .send()
            .await
            .expect("provision");
        let status = res.status();
        let text = res.text().await.unwrap_or_default();
        assert_eq!(status, 202, "provision {code}: {text}");
        let op: Value = serde_json::from_str(&text).expect("an operation");
        op["id"].as_str().expect("operation id").to_string()
    }

    pub fn controller_log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("controller/controller.log"))
            .unwrap_or_default()
    }

    /// `kill -9` the controller and start it again on the same port and database.
    pub fn restart_controller(&mut self) {
        self.restart_controller_with(&[]);
    }

    /// Like [`Cluster::restart_controller`], with extra environment (configuration).
    pub fn restart_controller_with(&mut self, env: &[(&str, &str)]) {
        self.controller.kill();
        let dir = self.state.path().join("controller");
        let mut all: Vec<(&str, &str)> = self
            .controller_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        all.extend_from_slice(env);
        self.controller = ControllerProcess::start(&self.db_url, &dir, self.ports.port(0), &all);
    }
}
