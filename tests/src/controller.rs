//! Running the controller in a test: [`TestController`] is the library over a [`TestDb`] with a
//! CA in a temporary state directory (for in-process tests and actix's test service), with
//! helpers to seed users, nodes, GPUs and images; [`ControllerProcess`] is the real
//! `cohort-controller serve` binary, to be killed and restarted.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_controller::accounts::auth::{new_api_token, sha256, Caller};
use cohort_controller::agent_client::{AgentConnector, MtlsConnector};
use cohort_controller::app::config::Config;
use cohort_controller::app::state::Controller;
use cohort_controller::db::models::api_token::ApiToken;
use cohort_controller::db::models::image::{Image, NewImage};
use cohort_controller::db::models::node::{NewNode, Node};
use cohort_controller::db::models::node_certificate::NodeCertificate;
use cohort_controller::db::models::user::{NewUser, User};
use cohort_controller::db::schema::{gpus, nodes};
use cohort_controller::nodes::pki::Pki;
use diesel::prelude::*;

use crate::TestDb;

pub struct TestController {
    pub db: TestDb,
    pub state: tempfile::TempDir,
    pub ctl: Arc<Controller>,
}

/// A configuration for tests: this database, this state directory, short intervals.
pub fn test_config(db_url: &str, state_dir: &Path) -> Config {
    let mut config = Config::default();
    config.database.url = db_url.to_string();
    config.database.pool_size = 12;
    config.server.state_dir = state_dir.to_path_buf();
    config.worker.lease_s = 3;
    config.worker.backoff_s = 1;
    config.poller.interval_s = 1;
    config.poller.offline_after_s = 3;
    config.poller.startup_grace_s = 0;
    config.placement.queue_interval_s = 1;
    config
}

impl TestController {
    pub fn new() -> Self {
        Self::build(None)
    }

    /// With another way to reach agents (a fake at the trait seam, for worker logic).
    pub fn with_agents(agents: Arc<dyn AgentConnector>) -> Self {
        Self::build(Some(agents))
    }

    fn build(agents: Option<Arc<dyn AgentConnector>>) -> Self {
        let db = TestDb::new();
        let state = tempfile::tempdir().expect("state dir");
        let pki = Arc::new(Pki::create(state.path(), &[]).expect("create CA"));
        let mut config = test_config(db.url(), state.path());
        config.worker.id = Some("test-worker-1".into());
        let pool = cohort_controller::db::pool_with(
            db.url(),
            config.database.pool_size,
            &config.database.session(),
        )
        .expect("pool");
        let agents =
            agents.unwrap_or_else(|| Arc::new(MtlsConnector::new(&pki, config.node_calls)));
        let ctl = Arc::new(Controller::new(pool, config, pki, agents));
        TestController { db, state, ctl }
    }

    /// A second controller on the same database, as another process would be: its own pool and
    /// worker name, the same CA and agents.
    pub fn another_process(&self, worker_id: &str) -> Arc<Controller> {
        self.another_configured(worker_id, |_| {})
    }

    /// Like [`TestController::another_process`], its configuration changed by `adjust` (e.g. a
    /// shorter reclaim minute).
    pub fn another_configured(
        &self,
        worker_id: &str,
        adjust: impl FnOnce(&mut Config),
    ) -> Arc<Controller> {
        let mut config = self.ctl.config.clone();
        config.worker.id = Some(worker_id.to_string());
        adjust(&mut config);
        let pool = cohort_controller::db::pool_with(
            self.db.url(),
            config.database.pool_size,
            &config.database.session(),
        )
        .expect("pool");
        Arc::new(Controller::new(
            pool,
            config,
            self.ctl.pki.clone(),
            self.ctl.agents.clone(),
        ))
    }

    pub fn conn(&self) -> PgConnection {
        self.db.connect()
    }

    /// A user of `role` (`admin`, `instructor`, `student`) and a bearer token for them.
    pub fn user(&self, username: &str, role: &str) -> (Caller, String) {
        let mut conn = self.conn();
        let user = User::insert(
            &mut conn,
            &NewUser {
                username,
                role,
                full_name: None,
                email: None,
            },
        )
        .expect("insert user");
        let token = new_api_token();
        ApiToken::insert(
            &mut conn,
            user.id,
            None,
            &sha256(&token),
            chrono::Utc::now() + chrono::Duration::days(1),
        )
        .expect("insert token");
        (Caller::new(user), token)
    }

    /// An online node with capacity and a (fake) live certificate, as if it had enrolled and
    /// answered a poll.
    pub fn node(
        &self,
        name: &str,
        ports: (i32, i32),
        cores: i32,
        memory_gib: i64,
        nvidia: bool,
    ) -> Node {
        let mut conn = self.conn();
        let node = Node::upsert(
            &mut conn,
            &NewNode {
                name,
                agent_url: "https://127.0.0.1:1",
                ssh_host: "127.0.0.1",
                ssh_port_first: ports.0,
                ssh_port_last: ports.1,
            },
        )
        .expect("insert node");
        diesel::update(nodes::table.find(node.id))
            .set((
                nodes::cores.eq(cores),
                nodes::memory_bytes.eq(memory_gib << 30),
                nodes::disk_total_bytes.eq(1i64 << 40),
                nodes::disk_free_bytes.eq(1i64 << 40),
                nodes::nvidia_runtime.eq(nvidia),
                nodes::last_heartbeat_at.eq(chrono::Utc::now()),
            ))
            .execute(&mut conn)
            .expect("node facts");
        NodeCertificate::insert(
            &mut conn,
            name,
            &format!("fp-{name}"),
            "",
            // Live: not expired (an expired certificate pins nothing).
            chrono::Utc::now() + chrono::Duration::days(365),
        )
        .expect("node certificate");
        Node::find(&mut conn, node.id).expect("reload node")
    }

    pub fn set_node_state(&self, node: &Node, state: &str) {
        let state = state.parse().expect("a node state");
        Node::set_state(&mut self.conn(), node.id, state).expect("set node state");
    }

    /// A GPU on `node`.
    pub fn gpu(&self, node: &Node, uuid: &str, idx: i32, model: &str, share_limit: i32) {
        diesel::insert_into(gpus::table)
            .values((
                gpus::node_id.eq(node.id),
                gpus::uuid.eq(uuid),
                gpus::idx.eq(idx),
                gpus::model.eq(model),
                gpus::memory_bytes.eq(40i64 << 30),
                gpus::pci_address.eq(format!("0000:{idx:02x}:00.0")),
                gpus::share_limit.eq(share_limit),
            ))
            .execute(&mut self.conn())
            .expect("insert gpu");
    }

    /// A catalog image row (no tarball) for placement tests.
    pub fn image(&self, alias: &str) -> Image {
        Image::insert(
            &mut self.conn(),
            &NewImage {
                fingerprint: &format!("{:0>64}", alias.len()),
                alias,
                description: "",
                gpu_ready: true,
                size_bytes: 1,
                created_by: None,
            },
        )
        .expect("insert image")
    }
}

impl Default for TestController {
    fn default() -> Self {
        Self::new()
    }
}

/// The workspace binary `name` (`cohort-controller`, `cohort-agent`, `cohort`, ...) next to the
/// test binary, built by cargo once per test process so that it is never stale.
///
/// Every binary is built in one `cargo build --workspace --bins`: the features cargo resolves
/// for the whole workspace are those `cargo test --workspace` built the dependencies with, so
/// after the test build this links the binaries and compiles nothing else. Building one
/// package (`-p cohort-agent`) resolves its dependencies' features anew and recompiled a
/// hundred crates per binary: ten minutes of every suite run, with the first tests waiting.
pub fn built_binary(name: &str) -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    // Test binaries live in target/<profile>/deps, other binaries (the benchmarks) in
    // target/<profile>: the binaries built here go next to them, in the same profile.
    let exe = std::env::current_exe().expect("test binary path");
    let mut dir = exe.parent().expect("binary dir");
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent().expect("profile dir");
    }
    let release = dir.file_name().is_some_and(|n| n == "release");
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--workspace", "--bins"])
            .args(release.then_some("--release"))
            .status()
            .expect("run cargo build");
        assert!(status.success(), "building the workspace's binaries failed");
    });
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not a binary of this workspace",
        path.display()
    );
    path
}

pub fn controller_binary() -> PathBuf {
    built_binary("cohort-controller")
}

/// `cohort-controller init` under `env` (its database, state dir, listen address and the rest of
/// the configuration the server will run with; a later pair wins), naming the first admin when
/// `admin` is given. Returns the admin token it prints once. Both bring-ups run it: the
/// [`crate::cluster::Cluster`] and the CLI tests' controller.
pub fn init_controller(env: &[(&str, &str)], admin: Option<&str>) -> String {
    let mut init = Command::new(controller_binary());
    init.arg("init");
    if let Some(admin) = admin {
        init.args(["--admin", admin]);
    }
    for (k, v) in env {
        init.env(k, v);
    }
    let out = init.output().expect("run cohort-controller init");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cohort-controller init failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("admin token (shown once): "))
        .expect("init prints the admin token")
        .trim()
        .to_string()
}

/// A `cohort-controller serve` process on 127.0.0.1:`port`, logging to `<state>/controller.log`.
pub struct ControllerProcess {
    child: Child,
    pub port: u16,
}

impl ControllerProcess {
    /// The [`crate::cluster::Cluster`]'s controller: polling each second, 3 s leases, debug
    /// logs in `<state>/controller.log`; `extra_env` wins over these.
    pub fn start(db_url: &str, state_dir: &Path, port: u16, extra_env: &[(&str, &str)]) -> Self {
        let state = state_dir.to_string_lossy();
        let listen = format!("127.0.0.1:{port}");
        let mut env = vec![
            ("DATABASE_URL", db_url),
            ("COHORT_STATE_DIR", state.as_ref()),
            ("COHORT_LISTEN", listen.as_str()),
            ("COHORT_POLL_INTERVAL_S", "1"),
            ("COHORT_LEASE_S", "3"),
            // Every node of every test shares this machine's one LXD pool (40 GiB), and a
            // student reserves their root disk and home on it: 1 GiB homes (the default is 5)
            // keep a class of a dozen placeable. A test that needs another size says so
            // (`home_mib` on its course, or this variable in `extra_env`).
            ("COHORT_DEFAULT_HOME_GIB", "1"),
            ("RUST_LOG", "info,cohort_controller=debug"),
        ];
        env.extend_from_slice(extra_env);
        Self::serve(&env, port, &state_dir.join("controller.log"))
    }

    /// `cohort-controller serve` with exactly `env` (a later pair wins), listening on
    /// 127.0.0.1:`port`, its output appended to `log`; returns once it accepts connections.
    /// Both bring-ups start their server here: the cluster's ([`ControllerProcess::start`]) and
    /// the CLI tests' own.
    pub fn serve(env: &[(&str, &str)], port: u16, log: &Path) -> Self {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("controller log");
        let mut cmd = Command::new(controller_binary());
        cmd.arg("serve")
            .stdout(Stdio::from(file.try_clone().expect("log fd")))
            .stderr(Stdio::from(file));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("start cohort-controller");
        let process = ControllerProcess { child, port };
        process.wait_healthy(log);
        process
    }

    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The process id, for benchmarks that account its CPU time.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_healthy(&self, log: &Path) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("the controller did not start listening within 30 s:\n{log}");
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}
