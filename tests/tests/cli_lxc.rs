//! The agreement test: on a one-node deployment (a real controller, a real agent in a
//! test LXD project) where Cohort created some instances, the real `lxc` and `cohort` agree:
//! `list --format csv -c ns` gives the same rows, `list --format json` has lxc's field names for
//! the facts both show, and `config show`'s keys are keys lxc shows too.

mod cli_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::{base_image_tarball, binary, Cli, Controller};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestLxd;
use cohort_proto::api::users::AddSshKey;
use serde_json::Value;

/// `cohort-agent join` + `serve` for node `name`, working in `lxd`'s project.
struct Agent {
    child: Child,
    _state: tempfile::TempDir,
}

impl Agent {
    fn join(controller: &Controller, cli: &Cli, lxd: &TestLxd, name: &str) -> Self {
        let token = cli.ok(&["-q", "node", "add", name]);
        let state = tempfile::tempdir().expect("agent state");
        let ports = &controller.ports;
        let listen = format!("127.0.0.1:{}", ports.port(1));
        let ssh_ports = format!("{}-{}", ports.port(2), ports.port(63));
        let out = Command::new(binary("cohort-agent"))
            .args(["join", token.trim(), "--listen", &listen])
            .args(["--agent-url", &format!("https://{listen}")])
            .args(["--ssh-host", "127.0.0.1", "--ssh-ports", &ssh_ports])
            .args(["--lxd-project", lxd.project()])
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
        let child = Command::new(binary("cohort-agent"))
            .arg("serve")
            .arg("--config")
            .arg(state.path().join("agent.toml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("run cohort-agent serve");
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
fn add_ssh_key(cli: &Cli) {
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

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn lxc_and_cohort_agree_on_a_one_node_deployment() {
    let lxd = TestLxd::new();
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    let _agent = Agent::join(&controller, &cli, &lxd, "node1");
    let started = Instant::now();
    while !cli
        .ok(&["cluster", "list", "-f", "csv"])
        .contains(",ONLINE,")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "node1 never came online"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // The controller hands the agent the owner's SSH keys, and the agent wants at least one.
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
    cli.ok(&[
        "-q",
        "launch",
        "cohort/base",
        "web1",
        "-c",
        "limits.memory=256MiB",
    ]);
    cli.ok(&[
        "-q",
        "init",
        "cohort/base",
        "db-2",
        "-c",
        "limits.memory=256MiB",
    ]);

    let ours = cli.ok(&["list", "-f", "csv", "-c", "ns"]);
    let theirs = lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    assert_eq!(sorted_lines(&ours), sorted_lines(&theirs));
    assert_eq!(sorted_lines(&ours), ["db-2,STOPPED", "web1,RUNNING"]);

    let ours: Vec<Value> = serde_json::from_str(&cli.ok(&["list", "-f", "json"])).unwrap();
    let theirs: Vec<Value> = serde_json::from_str(&lxd.lxc(&["list", "-f", "json"])).unwrap();
    for name in ["web1", "db-2"] {
        let find = |all: &[Value]| {
            all.iter()
                .find(|i| i["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name} listed"))
        };
        let (ours, theirs) = (find(&ours), find(&theirs));
        for field in ["name", "status", "type", "location", "config", "created_at"] {
            assert!(theirs.get(field).is_some(), "lxc has {field}");
            assert!(ours.get(field).is_some(), "cohort has {field}: {ours}");
        }
        for field in ["name", "status", "type"] {
            assert_eq!(ours[field], theirs[field], "{name}: {field}");
        }
    }

    let ours: Value = serde_yaml::from_str(&cli.ok(&["config", "show", "web1"])).unwrap();
    let theirs: Value = serde_yaml::from_str(&lxd.lxc(&["config", "show", "web1"])).unwrap();
    for key in ["config", "ephemeral", "stateful"] {
        assert!(
            theirs.get(key).is_some() && ours.get(key).is_some(),
            "{key}"
        );
    }
    let their_config = theirs["config"].as_object().expect("lxc config map");
    for (key, value) in ours["config"].as_object().expect("cohort config map") {
        assert!(their_config.contains_key(key), "lxc has config key {key}");
        if key == "limits.cpu" {
            assert_eq!(Some(value), their_config.get(key), "{key}");
        }
    }

    cli.ok(&["-q", "delete", "-f", "web1", "db-2"]);
    assert_eq!(lxd.lxc(&["list", "-f", "csv", "-c", "n"]), "");
}
