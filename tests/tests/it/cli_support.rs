//! Shared by the `cli_*` tests: a real controller (`cohort-controller init` + `serve` on a test
//! database and a free port) and the `cohort` binary with a configuration of its own.

#![allow(dead_code)] // the serial binary, which includes this file too, uses only part of it

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use cohort_e2e::controller::ControllerProcess;
use cohort_e2e::process;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestDb, TestLxd};
use cohort_proto::api::users::AddSshKey;

/// The first admin's username (`admin` itself is reserved for the system).
pub const ADMIN: &str = "labadmin";

/// A binary of this workspace, built by cargo once per test process so it is never stale:
/// `cohort` (package cohort-cli), `cohort-controller`, `cohort-agent`.
pub fn binary(name: &str) -> PathBuf {
    cohort_e2e::controller::built_binary(name)
}

/// A controller serving HTTPS on 127.0.0.1 with its own CA, database and state directory.
pub struct Controller {
    pub url: String,
    pub admin_token: String,
    pub state: tempfile::TempDir,
    pub ports: PortRange,
    /// `host:port` of the LXD-style API, when served ([`Controller::start_with_lxd_api`]).
    pub lxd_address: Option<String>,
    _process: ControllerProcess,
    _db: TestDb,
    _lxd_ports: Option<PortRange>,
}

impl Controller {
    /// The controller's database (for `cohort-controller password`).
    pub fn db_url(&self) -> &str {
        self._db.url()
    }

    pub fn start() -> Self {
        Self::start_serving(None, &[])
    }

    /// A controller that also serves the LXD-style API (`/1.0`) on a port of a block of its own.
    pub fn start_with_lxd_api() -> Self {
        Self::start_serving(Some(PortRange::claim()), &[])
    }

    /// A controller with these environment settings besides the usual ones.
    pub fn start_with_env(extra: &[(&str, &str)]) -> Self {
        Self::start_serving(None, extra)
    }

    fn start_serving(lxd_ports: Option<PortRange>, extra: &[(&str, &str)]) -> Self {
        let lxd_address = lxd_ports
            .as_ref()
            .map(|p| format!("127.0.0.1:{}", p.port(0)));
        let db = TestDb::new();
        let ports = PortRange::claim();
        let state = tempfile::tempdir().expect("state dir");
        let listen = format!("127.0.0.1:{}", ports.port(0));
        let state_dir = state.path().to_string_lossy();
        let mut env = vec![
            ("DATABASE_URL", db.url()),
            ("COHORT_STATE_DIR", state_dir.as_ref()),
            ("COHORT_LISTEN", listen.as_str()),
            ("COHORT_SERVER_NAMES", "127.0.0.1"),
            // One LXD pool serves every test (see `ControllerProcess::start`).
            ("COHORT_DEFAULT_HOME_GIB", "1"),
            ("RUST_LOG", "warn"),
        ];
        if let Some(lxd) = &lxd_address {
            env.push(("COHORT_LXD_LISTEN", lxd.as_str()));
        }
        env.extend_from_slice(extra);
        let admin_token = cohort_e2e::controller::init_controller(&env, Some(ADMIN));
        let process =
            ControllerProcess::serve(&env, ports.port(0), &state.path().join("serve.log"));
        let started = Instant::now();
        while let Some(lxd) = &lxd_address {
            if std::net::TcpStream::connect(lxd).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "controller did not serve the LXD-style API"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Controller {
            url: format!("https://{listen}"),
            admin_token,
            state,
            _process: process,
            _db: db,
            ports,
            lxd_address,
            _lxd_ports: lxd_ports,
        }
    }

    /// SHA-256 of the server certificate `init` wrote, as the CLI shows fingerprints.
    pub fn server_fingerprint(&self) -> String {
        let pem = std::fs::read_to_string(self.state.path().join("server.crt")).expect("cert");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("PEM body");
        cohort_cli::tls::fingerprint(&der)
    }
}

/// The `cohort` binary with a configuration of its own.
pub struct Cli {
    pub conf: tempfile::TempDir,
}

impl Cli {
    /// The `cohort` CLI of the caller holding `token` on `cluster`'s controller, as remote `lab`.
    pub fn of_cluster(cluster: &cohort_e2e::cluster::Cluster, token: &str) -> Self {
        let cli = Cli {
            conf: tempfile::tempdir().expect("conf dir"),
        };
        cli.ok(&[
            "remote",
            "add",
            "lab",
            &cluster.controller.url(),
            "--token",
            token,
            "--accept-certificate",
        ]);
        cli
    }

    /// A client with the controller added as remote `lab` with the admin token.
    pub fn admin_of(controller: &Controller) -> Self {
        let cli = Cli {
            conf: tempfile::tempdir().expect("conf dir"),
        };
        cli.ok(&[
            "remote",
            "add",
            "lab",
            &controller.url,
            "--token",
            &controller.admin_token,
            "--accept-certificate",
        ]);
        cli
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, b"")
    }

    /// Runs with `input` piped to stdin.
    pub fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut cohort = Command::new(binary("cohort"));
        cohort.args(args).env("COHORT_CONF", self.conf.path());
        process::output_with_input_within(&mut cohort, input, process::BOUND)
    }

    /// Runs and returns stdout; panics with stderr on failure.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "cohort {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs expecting lxc's failure: exit 1 and `Error: <message>` on stderr.
    pub fn fails(&self, args: &[&str], message: &str) {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "cohort {}: {stderr}",
            args.join(" ")
        );
        assert!(
            stderr.starts_with("Error: ") && stderr.contains(message),
            "cohort {}: expected {message:?} in {stderr:?}",
            args.join(" ")
        );
    }
}

/// The unified tarball of `cohort/base` that `scripts/setup` built.
pub fn base_image_tarball() -> PathBuf {
    cohort_e2e::images::base_tarball()
}

/// `cohort-agent join` + `serve` for node `name`, working in `lxd`'s project.
pub struct Agent {
    child: Child,
    _state: tempfile::TempDir,
}

impl Agent {
    pub fn join(controller: &Controller, cli: &Cli, lxd: &TestLxd, name: &str) -> Self {
        Self::join_on(controller, cli, lxd, name, None)
    }

    /// Like `join`, on `network` when one is given: the agent makes its bridge, and the node's
    /// SSH host is the bridge's address (where NAT forwards listen).
    pub fn join_on(
        controller: &Controller,
        cli: &Cli,
        lxd: &TestLxd,
        name: &str,
        network: Option<&cohort_e2e::TestNetwork>,
    ) -> Self {
        let ssh_host = network.map_or("127.0.0.1".to_string(), |n| n.gateway().to_string());
        let token = cli.ok(&["-q", "node", "add", name, "--address", "127.0.0.1"]);
        let state = tempfile::tempdir().expect("agent state");
        let ports = &controller.ports;
        let listen = format!("127.0.0.1:{}", ports.port(1));
        let ssh_ports = format!("{}-{}", ports.port(2), ports.port(63));
        let out = Command::new(binary("cohort-agent"))
            .args(["join", token.trim(), "--listen", &listen])
            .args(["--agent-url", &format!("https://{listen}")])
            .args(["--ssh-host", &ssh_host, "--ssh-ports", &ssh_ports])
            .args(["--lxd-project", lxd.project()])
            .args(["--lxd-socket", &lxd.daemon().socket_path()])
            .arg("--state-dir")
            .arg(state.path())
            .output()
            .expect("run cohort-agent join");
        assert!(
            out.status.success(),
            "join: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::File::create(state.path().join("agent.log")).expect("log");
        let mut serve = Command::new(binary("cohort-agent"));
        serve
            .arg("serve")
            .arg("--config")
            .arg(state.path().join("agent.toml"))
            .stdout(Stdio::null())
            .stderr(log);
        match network {
            // Tests that want a node network make one of their own (`TestNetwork`).
            None => serve.env("COHORT_AGENT_NETWORK_MODE", "none"),
            Some(n) => serve
                .env("COHORT_AGENT_NETWORK_MODE", "managed")
                .env("COHORT_AGENT_NETWORK_NAME", n.name())
                .env("COHORT_AGENT_NETWORK_SUBNET", n.subnet())
                .env("COHORT_AGENT_NETWORK_SSH_ADDRESS", n.gateway().to_string()),
        };
        let child = serve.spawn().expect("run cohort-agent serve");
        Agent {
            child,
            _state: state,
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST /me/ssh-keys` for the admin (the CLI has no verb for keys), through the CLI's own
/// client and its pinned remote.
pub fn add_ssh_key(cli: &Cli) {
    let config = cohort_cli::config::Config::load(&cli.conf.path().join("config.yml")).unwrap();
    let client = cohort_cli::client::Client::new(config.remote("lab").unwrap()).unwrap();
    let key = AddSshKey {
        public_key: SshKey::generate().public_key(),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _: serde_json::Value = runtime
        .block_on(client.post("/me/ssh-keys", &key))
        .expect("add an SSH key");
}

/// A one-node deployment: a test LXD project, a controller, an agent enrolled as `node1` and
/// online, the admin with an SSH key (so its containers get a login and a proxy device, as a
/// student's do) and `cohort/base` imported. Field order is drop order: the agent stops before
/// the project goes.
pub struct OneNode {
    pub cli: Cli,
    pub agent: Agent,
    pub controller: Controller,
    pub lxd: TestLxd,
}

impl OneNode {
    pub fn start() -> Self {
        Self::start_on(None)
    }

    /// A one-node deployment whose node is on `network` (see [`Agent::join_on`]).
    pub fn start_on(network: Option<&cohort_e2e::TestNetwork>) -> Self {
        Self::start_with(Controller::start(), network)
    }

    /// A one-node deployment on `network` (when given) whose controller has `env` besides the
    /// usual settings.
    pub fn start_with_env(network: Option<&cohort_e2e::TestNetwork>, env: &[(&str, &str)]) -> Self {
        Self::start_with(Controller::start_with_env(env), network)
    }

    /// Like [`OneNode::start_with_env`], without a node network, on `daemon` (LXD or Incus).
    pub fn start_with_env_on(daemon: cohort_e2e::lxd::TestDaemon, env: &[(&str, &str)]) -> Self {
        Self::start_in(Controller::start_with_env(env), None, TestLxd::on(daemon))
    }

    /// A one-node deployment whose controller also serves the LXD-style API.
    pub fn start_with_lxd_api() -> Self {
        Self::start_with(Controller::start_with_lxd_api(), None)
    }

    /// A one-node deployment serving the LXD-style API whose node is on `network`.
    pub fn start_with_lxd_api_on(network: &cohort_e2e::TestNetwork) -> Self {
        Self::start_with(Controller::start_with_lxd_api(), Some(network))
    }

    fn start_with(controller: Controller, network: Option<&cohort_e2e::TestNetwork>) -> Self {
        Self::start_in(controller, network, TestLxd::new())
    }

    fn start_in(
        controller: Controller,
        network: Option<&cohort_e2e::TestNetwork>,
        lxd: TestLxd,
    ) -> Self {
        let cli = Cli::admin_of(&controller);
        let agent = Agent::join_on(&controller, &cli, &lxd, "node1", network);
        let started = Instant::now();
        // Online, and its capacity reported by a poll (the CPU column): a node that has not
        // reported any queues every placement.
        while !cli.ok(&["cluster", "list", "-f", "csv"]).lines().any(|l| {
            let cols: Vec<&str> = l.split(',').collect();
            cols.get(2) == Some(&"ONLINE") && cols.get(4).is_some_and(|c| *c != "0")
        }) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "node1 never came online with its capacity"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        add_ssh_key(&cli);
        let tarball = base_image_tarball();
        cli.ok(&[
            "-q",
            "image",
            "import",
            tarball.to_str().unwrap(),
            "--alias",
            "cohort/base",
        ]);
        OneNode {
            cli,
            agent,
            controller,
            lxd,
        }
    }
}

/// The real `lxc` client (Debian's lxd-client 5.0.2) with a configuration directory of its own
/// (`LXD_CONF`), so tests never read or change the user's remotes or client certificate.
pub struct Lxc {
    pub conf: tempfile::TempDir,
}

impl Lxc {
    pub fn new() -> Self {
        Lxc {
            conf: tempfile::tempdir().expect("lxc conf dir"),
        }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        process::output_within(&mut self.command(args), process::BOUND)
    }

    /// `lxc ARGS` with this client's configuration, not started.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("lxc");
        command.args(args).env("LXD_CONF", self.conf.path());
        command
    }

    /// stdout of a command that must succeed.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "lxc {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A command that must fail with `message` in its stderr.
    pub fn fails(&self, args: &[&str], message: &str) {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "lxc {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            stderr.contains(message),
            "lxc {args:?}: {stderr:?} lacks {message:?}"
        );
    }

    /// `cohort config trust add` for `user` (None: the CLI's own user), redeemed by
    /// `lxc remote add lab TOKEN`.
    pub fn trusted_by(cli: &Cli, name: &str, user: Option<&str>) -> Self {
        let mut args = vec!["config", "trust", "add", name];
        if let Some(user) = user {
            args.extend(["--user", user]);
        }
        let token = token_of(&cli.ok(&args));
        let lxc = Lxc::new();
        lxc.ok(&["remote", "add", "lab", &token]);
        lxc
    }

    /// `curl` to the LXD-style API with this client's certificate: the parsed JSON answer and
    /// the HTTP status.
    pub fn curl(&self, address: &str, path: &str) -> (serde_json::Value, u16) {
        self.curl_with(address, path, &[])
    }

    /// [`Lxc::curl`] with more of curl's arguments (a method, headers, a body); at most 20 s.
    pub fn curl_with(&self, address: &str, path: &str, extra: &[&str]) -> (serde_json::Value, u16) {
        curl_as(self.conf.path(), address, path, extra)
    }
}

/// `curl` to the LXD-style API at `address` with the client certificate an `lxc` or `incus`
/// configuration directory `conf` holds (`client.crt`, `client.key`), with more of curl's
/// arguments; at most 20 s. The JSON answer and the HTTP status.
pub fn curl_as(
    conf: &std::path::Path,
    address: &str,
    path: &str,
    extra: &[&str],
) -> (serde_json::Value, u16) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(extra)
        .arg("--cert")
        .arg(conf.join("client.crt"))
        .arg("--key")
        .arg(conf.join("client.key"))
        .arg(format!("https://{address}{path}"))
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, status) = text.rsplit_once('\n').expect("status line");
    (
        serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON from {path}: {body}")),
        status.trim().parse().expect("status"),
    )
}

/// The IPv4 address the node's daemon `lxd` reports for container `name` once it has exactly
/// one (on `eth0`); at most 120 s.
pub fn eth0_address(lxd: &TestLxd, name: &str) -> String {
    let started = Instant::now();
    loop {
        let shown = lxd.lxc(&["list", name, "-c", "4", "-f", "csv"]);
        if let Some(a) = shown.strip_suffix(" (eth0)\n") {
            return a.to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the daemon never gave {name} one address: {shown:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

impl Default for Lxc {
    fn default() -> Self {
        Self::new()
    }
}

/// The token line of `cohort config trust add`'s output.
pub fn token_of(output: &str) -> String {
    output
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("a token line in {output:?}"))
        .trim()
        .to_string()
}
