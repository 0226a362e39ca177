//! End to end with the real binaries' parts: `cohort-controller init` and `serve` as a process,
//! a real agent (enrolled with a join token, serving in this test) on a TestLxd project, real
//! PostgreSQL and a real ssh login. An instance is created through the API, runs, answers ssh and
//! is deleted; the controller is killed between two items of an operation and, restarted,
//! completes it exactly once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cohort_controller::models::operation_item::OperationItem;
use cohort_e2e::controller::{controller_binary, ControllerProcess};
use cohort_e2e::ssh::SshKey;
use cohort_e2e::{PortRange, TestDb, TestLxd};
use cohort_proto::api::images::Image;
use cohort_proto::api::instances::{Instance, ObservedState};
use cohort_proto::api::nodes::{JoinTokenIssued, Node};
use cohort_proto::api::operations::{Operation, OperationStatus};
use cohort_proto::api::users::ApiTokenIssued;
use serde_json::json;

/// The base image tarball `scripts/setup` built (its SHA-256 is its LXD fingerprint).
fn base_tarball() -> PathBuf {
    let dir = std::env::var("COHORT_CACHE_DIR").unwrap_or_else(|_| "/var/cache/cohort".into());
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e} (run scripts/setup)"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cohort-base-") && n.ends_with(".tar.gz"))
        })
        .unwrap_or_else(|| panic!("no cohort-base tarball in {dir} (run scripts/setup)"))
}

struct Api {
    client: reqwest::Client,
    base: String,
}

impl Api {
    fn new(state: &std::path::Path, port: u16) -> Self {
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

    async fn call<T: serde::de::DeserializeOwned>(
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

    async fn wait(&self, token: &str, op: &Operation) -> Operation {
        let done: Operation = self
            .call(
                token,
                reqwest::Method::GET,
                &format!("/operations/{}/wait?timeout=300", op.id),
                None,
            )
            .await;
        assert_eq!(done.status, OperationStatus::Success, "{done:#?}");
        done
    }
}

/// Runs `cohort-controller init` and returns the admin token it printed.
fn init(db: &TestDb, state: &std::path::Path) -> String {
    let out = std::process::Command::new(controller_binary())
        .args(["init", "--admin", "admin"])
        .env("DATABASE_URL", db.url())
        .env("COHORT_STATE_DIR", state)
        .output()
        .expect("run init");
    assert!(
        out.status.success(),
        "init failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for file in [
        "ca.key",
        "ca.crt",
        "server.key",
        "server.crt",
        "client.key",
        "client.crt",
    ] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(state.join(file))
            .expect(file)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{file} is {mode:o}");
    }
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("admin token (shown once): "))
        .expect("init prints the admin token")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn enroll_create_ssh_delete_and_survive_a_controller_kill() {
    let db = TestDb::new();
    let lxd = TestLxd::new();
    let ports = PortRange::claim();
    let state = tempfile::tempdir().expect("controller state");
    let agent_state = tempfile::tempdir().expect("agent state");
    let (controller_port, agent_port) = (ports.port(0), ports.port(1));
    let ssh_ports = (ports.port(2), ports.port(20));

    let admin = init(&db, state.path());
    let mut controller = ControllerProcess::start(db.url(), state.path(), controller_port, &[]);
    let api = Api::new(state.path(), controller_port);
    use reqwest::Method as M;

    // The template image goes into the catalog through the API.
    let tarball = tokio::fs::read(base_tarball()).await.expect("read tarball");
    let resp = api
        .client
        .post(format!("{}/images?alias=cohort/base&gpu_ready=false", api.base))
        .bearer_auth(&admin)
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
    let image: Image = resp.json().await.expect("image");

    // Enroll a real agent with a join token and serve it.
    let issued: JoinTokenIssued = api
        .call(
            &admin,
            M::POST,
            "/nodes/tokens",
            Some(json!({"node_name": "node-e2e"})),
        )
        .await;
    let opts = cohort_agent::enroll::JoinOptions {
        state_dir: agent_state.path().to_path_buf(),
        listen: format!("127.0.0.1:{agent_port}").parse().unwrap(),
        agent_url: format!("https://127.0.0.1:{agent_port}"),
        ssh_host: "127.0.0.1".into(),
        ssh_port_first: ssh_ports.0,
        ssh_port_last: ssh_ports.1,
        lxd_project: Some(lxd.project().to_string()),
        storage_pool: None,
    };
    let mut config = cohort_agent::enroll::join(&issued.token, &opts)
        .await
        .expect("agent joins");
    config.lxd_socket = Some(cohort_e2e::lxd::socket_path().into());
    config.ssh_listen = "127.0.0.1".into();
    let read = |p: PathBuf| std::fs::read(p).expect("agent state file");
    let tls = cohort_agent::tls::server_config(
        &read(config.cert_path()),
        &read(config.key_path()),
        &read(config.ca_path()),
    )
    .expect("agent tls");
    let node = Arc::new(
        cohort_agent::Node::connect(config)
            .await
            .expect("agent connects to LXD"),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", agent_port))
        .await
        .expect("agent port");
    let agent = tokio::spawn(cohort_agent::api::serve(listener, Arc::new(tls), node));

    // The poller finds it online with its capacity, and sees it holds the image.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n: Node = api.call(&admin, M::GET, "/nodes/node-e2e", None).await;
        let i: Image = api.call(&admin, M::GET, &format!("/images/{}", image.fingerprint), None).await;
        if n.last_heartbeat_at.is_some() && n.cores > 0 && i.nodes == ["node-e2e"] {
            break;
        }
        assert!(Instant::now() < deadline, "node never polled: {n:?} {i:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // A student with a key gets an instance through the API, and logs in.
    let _: serde_json::Value = api
        .call(
            &admin,
            M::POST,
            "/users",
            Some(json!({"username": "alice", "role": "student"})),
        )
        .await;
    let alice: ApiTokenIssued = api
        .call(&admin, M::POST, "/users/alice/tokens", Some(json!({})))
        .await;
    let key = SshKey::generate();
    let _: serde_json::Value = api
        .call(
            &alice.token,
            M::POST,
            "/me/ssh-keys",
            Some(json!({"public_key": key.public_key()})),
        )
        .await;
    let limits = json!({"cpu": 1, "memory_mib": 512, "disk_gib": 2});
    let op: Operation = api
        .call(
            &alice.token,
            M::POST,
            "/instances",
            Some(json!({"name": "e2e-alice", "image": image.alias, "limits": limits})),
        )
        .await;
    api.wait(&alice.token, &op).await;
    let inst: Instance = api
        .call(&alice.token, M::GET, "/instances/e2e-alice", None)
        .await;
    assert_eq!(inst.observed_state, ObservedState::Running, "{inst:?}");
    assert_eq!(inst.node.as_deref(), Some("node-e2e"));
    let port = inst.ssh_port.expect("ssh port");
    assert!((ssh_ports.0..=ssh_ports.1).contains(&port));
    assert!(lxd.instance_names().contains(&"e2e-alice".to_string()));
    let out = key.run_when_up(
        "127.0.0.1",
        port,
        "alice",
        "whoami",
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "ssh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "alice");

    // A second instance, then an operation with two items (evacuate: stop both). Kill the
    // controller as soon as the first item is done; the restarted one finishes the second.
    let op: Operation = api
        .call(
            &admin,
            M::POST,
            "/instances",
            Some(json!({"name": "e2e-two", "image": "cohort/base", "limits": limits, "owner": "alice"})),
        )
        .await;
    api.wait(&admin, &op).await;
    let evac: Operation = api
        .call(
            &admin,
            M::POST,
            "/nodes/node-e2e/evacuate",
            Some(json!({"policy": "stop"})),
        )
        .await;
    assert_eq!(evac.items.len(), 2);
    let mut conn = db.connect();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let items = OperationItem::for_operation(&mut conn, evac.id).unwrap();
        if items[0].status == "success" {
            assert_ne!(
                items[1].status, "success",
                "both items finished before the kill could land"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "first item never finished: {items:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    controller.kill();
    let before = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    controller = ControllerProcess::start(db.url(), state.path(), controller_port, &[]);
    let done = api.wait(&admin, &evac).await;
    assert_eq!(done.progress.done, 2);
    let after = OperationItem::for_operation(&mut conn, evac.id).unwrap();
    assert_eq!(
        after[0].attempts, before[0].attempts,
        "the finished item ran again after the restart"
    );
    assert!(after.iter().all(|i| i.status == "success"));
    for name in ["e2e-alice", "e2e-two"] {
        let i: Instance = api
            .call(&admin, M::GET, &format!("/instances/{name}"), None)
            .await;
        assert_eq!(i.observed_state, ObservedState::Stopped, "{i:?}");
    }

    // Delete: the container goes from LXD and the port is free again.
    for name in ["e2e-alice", "e2e-two"] {
        let op: Operation = api
            .call(
                &admin,
                M::DELETE,
                &format!("/instances/{name}?force=true"),
                None,
            )
            .await;
        api.wait(&admin, &op).await;
    }
    let resp = api
        .client
        .get(format!("{}/instances/e2e-alice", api.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(
        lxd.instance_names().is_empty(),
        "{:?}",
        lxd.instance_names()
    );

    // Removing the node revokes its certificate: the controller no longer talks to it.
    let _: serde_json::Value = api
        .call(&admin, M::POST, "/nodes/node-e2e/restore", None)
        .await;
    let resp = api
        .client
        .delete(format!("{}/nodes/node-e2e", api.base))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let nodes: Vec<Node> = api.call(&admin, M::GET, "/nodes", None).await;
    assert!(nodes.is_empty());
    drop(controller);
    agent.abort();
}
