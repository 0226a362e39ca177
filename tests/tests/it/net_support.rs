//! What the node-network tests share: an HTTP server in a namespace (the outside), a student's
//! create request, the agent calls they make, and what they look for on the host.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cohort_e2e::agent::TestAgent;
use cohort_e2e::lxd::lxc;
use cohort_e2e::network::Netns;
use cohort_e2e::ssh::SshKey;
use cohort_e2e::TestLxd;
use cohort_proto::agent::{
    CreateInstance, Instance, InstanceSource, Inventory, Limits, NetworkPolicy, SshAccess,
};

/// An HTTP server in a namespace, serving one file; killed on drop.
pub struct WebServer {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl WebServer {
    pub fn start(ns: &Netns, port: u16) -> Self {
        let dir = tempfile::tempdir().expect("web root");
        std::fs::write(dir.path().join("dataset.txt"), "rows: 42\n").expect("write file");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, "python3", "-m", "http.server"])
            .args(["--bind", &ns.address.to_string(), &port.to_string()])
            .arg("--directory")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 -m http.server");
        let url = format!("http://{}:{port}/dataset.txt", ns.address);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !ns
            .exec("python3", &["-c", &fetch_script(&url, 1)])
            .status
            .success()
        {
            assert!(Instant::now() < deadline, "the web server never answered");
            std::thread::sleep(Duration::from_millis(100));
        }
        WebServer {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for WebServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Python that prints the body of `url`, failing after `timeout` seconds.
pub fn fetch_script(url: &str, timeout: u32) -> String {
    format!(
        "import urllib.request; print(urllib.request.urlopen('{url}', timeout={timeout}).read().decode(), end='')"
    )
}

/// Python that asks the container's DNS server (its `resolv.conf`'s) for `name`'s address over
/// UDP and exits 0 on any answer, 1 when none comes within `timeout` seconds.
pub fn dns_script(name: &str, timeout: u32) -> String {
    format!(
        "import socket,sys\n\
         ns=[l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]\n\
         q=b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00'\
         +b''.join(bytes([len(p)])+p.encode() for p in '{name}'.split('.'))+b'\\x00\\x00\\x01\\x00\\x01'\n\
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.settimeout({timeout})\n\
         s.sendto(q,(ns,53))\n\
         try:\n s.recvfrom(512); print('answered')\n\
         except OSError as e:\n print(e); sys.exit(1)"
    )
}

/// Python that connects to `host:port` and exits 0 on success, 1 on refusal or timeout.
pub fn connect_script(host: &str, port: u16) -> String {
    format!(
        "import socket,sys\ntry:\n socket.create_connection(('{host}', {port}), 2).close()\nexcept OSError as e:\n print(e); sys.exit(1)"
    )
}

pub fn student(name: &str, user: &str, key: &SshKey, port: u16) -> CreateInstance {
    CreateInstance {
        idempotency_key: format!("op-{name}"),
        name: name.into(),
        source: InstanceSource::Image {
            alias: "cohort/base".into(),
        },
        limits: Limits {
            cpu: 1,
            memory_mib: 256,
            disk_gib: 2,
        },
        gpus: Vec::new(),
        ssh: Some(SshAccess {
            username: user.into(),
            authorized_keys: vec![key.public_key()],
            password_hash: None,
            sudo: false,
            // What the controller sends for a node whose SSH host is loopback: NAT cannot
            // listen there, so the agent listens on the node's SSH address instead.
            listen_address: "127.0.0.1".into(),
            port,
        }),
        home_volume: None,
        home_mib: None,
        home_snapshots: None,
        config: BTreeMap::new(),
        start: true,
        network_policy: None,
    }
}

pub async fn create(agent: &TestAgent, req: &CreateInstance) -> Instance {
    let resp = agent
        .controller()
        .post(agent.url("/v1/instances"))
        .json(req)
        .send()
        .await
        .expect("POST /v1/instances");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert_eq!(status, 201, "create {} failed: {text}", req.name);
    serde_json::from_str(&text).expect("Instance JSON")
}

pub async fn inventory(agent: &TestAgent) -> Inventory {
    agent
        .controller()
        .get(agent.url("/v1/inventory"))
        .send()
        .await
        .expect("GET /v1/inventory")
        .json()
        .await
        .expect("Inventory JSON")
}

pub async fn set_policy(agent: &TestAgent, name: &str, policy: &NetworkPolicy) {
    let resp = agent
        .controller()
        .put(agent.url(&format!("/v1/instances/{name}/network-policy")))
        .json(policy)
        .send()
        .await
        .expect("PUT network-policy");
    let status = resp.status();
    assert_eq!(status, 200, "{}", resp.text().await.unwrap_or_default());
}

/// Runs python3 code in the container; (success, stdout and stderr).
pub fn python_in(lxd: &TestLxd, name: &str, code: &str) -> (bool, String) {
    let out = lxd.lxc_output(&["exec", name, "--", "python3", "-c", code]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `lxd forkproxy` processes whose command line names `:port`.
pub fn forkproxies_on(port: u16) -> usize {
    let needle = format!(":{port}");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains("forkproxy") && cmd.contains(&needle))
        .count()
}

/// The PID of the container's init, which a restart changes.
pub fn init_pid(lxd: &TestLxd, name: &str) -> i64 {
    let state = lxc(&[
        "query",
        &format!("/1.0/instances/{name}/state?project={}", lxd.project()),
    ]);
    let v: serde_json::Value = serde_json::from_str(&state).expect("state JSON");
    v["pid"].as_i64().expect("pid")
}

/// `Tcp InSegs` of the container's network namespace: TCP segments that reached it.
pub fn tcp_segments_in(lxd: &TestLxd, name: &str) -> u64 {
    let snmp = lxd.lxc(&["exec", name, "--", "cat", "/proc/net/snmp"]);
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (head, values) = (
        tcp.next().expect("Tcp header"),
        tcp.next().expect("Tcp values"),
    );
    let at = head
        .split_whitespace()
        .position(|h| h == "InSegs")
        .expect("InSegs");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// The agent's answer to `PUT /v1/instances/{name}/state`.
pub async fn change_state(agent: &TestAgent, name: &str, action: &str) -> Instance {
    let resp = agent
        .controller()
        .put(agent.url(&format!("/v1/instances/{name}/state")))
        .json(&serde_json::json!({"action": action, "force": true}))
        .send()
        .await
        .expect("PUT state");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    assert_eq!(status, 200, "{action} {name}: {text}");
    serde_json::from_str(&text).expect("Instance JSON")
}
