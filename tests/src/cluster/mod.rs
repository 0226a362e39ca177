//! `Cluster`: a whole Cohort deployment on this machine, all real processes. A
//! `cohort-controller` (its own database and state dir) and N `cohort-agent`s, each enrolled with
//! a join token exactly as an admin would (`cohort-agent join`), each in its own LXD project
//! with its own SSH port range. Processes can be killed (-9) and restarted; everything goes on
//! `Drop`.

mod api;
mod builder;
mod node;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::controller::{init_controller, ControllerProcess};
use crate::{PortRange, TestDb, TestLxd};

pub use builder::ClusterBuilder;
pub use node::{agent_binary, ClusterNode};

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
    /// Ends the test binary should the test outlive [`crate::process::TEST_LIMIT`].
    _watchdog: crate::process::Watchdog,
}

impl Cluster {
    /// A deployment to be described, then started: [`ClusterBuilder::start`].
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// A controller and `nodes` enrolled agents named `node1`, `node2`, ..., all online.
    pub async fn start(nodes: usize) -> Self {
        Self::builder().nodes(nodes).start().await
    }

    /// Like `start`, with extra environment for the controller.
    pub async fn start_with_env(nodes: usize, controller_env: &[(&str, &str)]) -> Self {
        Self::builder()
            .nodes(nodes)
            .env(controller_env)
            .start()
            .await
    }

    /// Like [`Cluster::start`] on the (empty) database at `db_url`, e.g. a
    /// [`crate::pg::PrivatePg`]'s; `cohort-controller init` migrates it.
    pub async fn start_with_database(nodes: usize, db_url: &str) -> Self {
        Self::builder().nodes(nodes).database(db_url).start().await
    }

    /// Like [`Cluster::start`] (or on `db_url` when given), the controller always started with
    /// `env` (configuration, e.g. `COHORT_CPU_OVERCOMMIT`).
    pub async fn start_configured(
        nodes: usize,
        db_url: Option<&str>,
        env: &[(&str, &str)],
    ) -> Self {
        let builder = Self::builder().nodes(nodes).env(env);
        match db_url {
            Some(url) => builder.database(url).start().await,
            None => builder.start().await,
        }
    }

    /// A controller with no nodes that agents on other hosts reach at `address`: see
    /// [`ClusterBuilder::reachable_at`].
    pub async fn start_reachable_at(address: std::net::Ipv4Addr, env: &[(&str, &str)]) -> Self {
        Self::builder().reachable_at(address).env(env).start().await
    }

    pub(super) async fn start_with_ports(
        nodes: usize,
        db: Option<TestDb>,
        db_url: String,
        env: &[(&str, &str)],
        ports: PortRange,
    ) -> Self {
        let state = tempfile::tempdir().expect("cluster state dir");
        let controller_dir = state.path().join("controller");
        std::fs::create_dir_all(&controller_dir).expect("controller dir");
        let listen = format!("127.0.0.1:{}", ports.port(0));
        let state_dir = controller_dir.to_string_lossy();
        let mut init_env = vec![
            ("DATABASE_URL", db_url.as_str()),
            ("COHORT_STATE_DIR", state_dir.as_ref()),
            ("COHORT_LISTEN", listen.as_str()),
        ];
        // The configuration the server runs with (the certificate's names, say).
        init_env.extend_from_slice(env);
        let admin_token = init_controller(&init_env, None);
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
            _watchdog: crate::process::Watchdog::arm(),
        };
        for i in 1..=nodes {
            cluster.add_node(&format!("node{i}")).await;
        }
        cluster
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
        let state_dir = self.state.path().join(name);
        let mut node = ClusterNode::new(name, lxd, ssh_ports, agent_port, state_dir);
        self.join(&node).await;
        node.spawn();
        self.nodes.push(node);
        self.wait_node_ready(name, Duration::from_secs(30)).await;
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
                Some(crate::bodies::to_json(&crate::bodies::join_token(
                    &node.name,
                    &["127.0.0.1".to_string()],
                ))),
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

    /// The controller's state directory: its CA and certificates, image store and log.
    pub fn controller_dir(&self) -> PathBuf {
        self.state.path().join("controller")
    }

    pub fn controller_log(&self) -> String {
        std::fs::read_to_string(self.controller_dir().join("controller.log")).unwrap_or_default()
    }

    /// `kill -9` the controller and start it again on the same port and database.
    pub fn restart_controller(&mut self) {
        self.restart_controller_with(&[]);
    }

    /// Like [`Cluster::restart_controller`], with extra environment (configuration).
    pub fn restart_controller_with(&mut self, env: &[(&str, &str)]) {
        self.controller.kill();
        let dir = self.controller_dir();
        let mut all: Vec<(&str, &str)> = self
            .controller_env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        all.extend_from_slice(env);
        self.controller = ControllerProcess::start(&self.db_url, &dir, self.ports.port(0), &all);
    }
}
