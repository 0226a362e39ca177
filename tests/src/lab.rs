//! `Lab`: a lab of separate machines on this one. Each node is a network namespace of its own
//! with its own address on a test network (a bridge `ctl<B>` on `10.248.<B>.0/24`, one veth pair
//! per node), its own LXD daemon (own `LXD_DIR`, own `dir` storage pool, started inside the
//! namespace as LXD's own test suite runs several) and its own `cohort-agent`. The controller
//! and PostgreSQL stay on the host; the controller listens on the bridge's address, so all agent
//! traffic crosses the test network, where faults are made with nftables in a node's namespace.
//!
//! The namespaces get no default route: only the test network is reachable from them (LXD asks
//! for its image server's name at start; with no route, no packet leaves). Block `B` is claimed
//! with an exclusive `flock`; whatever a dead holder left in it (daemons, their containers,
//! namespaces, links, state) is removed when it is claimed, and everything goes on `Drop`.

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};

use crate::cluster::{agent_binary, Cluster};
use crate::network::{output, run};

const BLOCKS: u8 = 50;
/// The nftables table a fault lives in, inside a node's namespace.
const FAULT_TABLE: &str = "cohortlabfault";
/// Where every node's SSH forwards listen (its own namespace: no other node shares them).
const SSH_PORTS: &str = "22000-22063";
const AGENT_PORT: u16 = 9443;

/// The claimed test network: the bridge and its block of addresses.
pub struct LabNet {
    block: u8,
    _lock: Flock<File>,
}

/// One node: a namespace with an address, a daemon and an agent.
pub struct LabNode {
    pub name: String,
    pub address: Ipv4Addr,
    netns: String,
    dir: PathBuf,
    daemon: Option<Child>,
    agent: Option<Child>,
    /// Extra environment of the agent (a test setting), kept for its restarts.
    agent_env: Vec<(String, String)>,
}

/// A controller on the host and the nodes on the test network. Fields drop in order: the
/// nodes (agents, daemons and containers) before the controller, the network last.
pub struct Lab {
    pub nodes: Vec<LabNode>,
    pub cluster: Cluster,
    /// Extra environment of the agents of nodes added from now on (a test setting).
    pub agent_env: Vec<(String, String)>,
    net: LabNet,
}

fn labs_dir() -> PathBuf {
    std::env::temp_dir().join("cohort-test-labs")
}

impl LabNet {
    /// Claims a free block, clears what a dead holder left in it and makes the bridge.
    fn claim() -> Self {
        let dir = labs_dir();
        std::fs::create_dir_all(&dir).expect("lab lock dir");
        let start = (std::process::id() % u32::from(BLOCKS)) as u8;
        for i in 0..BLOCKS {
            let block = (start + i) % BLOCKS;
            let file = File::create(dir.join(format!("block-{block}.lock"))).expect("lock file");
            let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
                continue;
            };
            let net = LabNet { block, _lock: lock };
            net.clear();
            let bridge = net.bridge();
            run("ip", &["link", "add", &bridge, "type", "bridge"]);
            let gateway = format!("{}/24", net.gateway());
            run("ip", &["addr", "add", &gateway, "dev", &bridge]);
            run("ip", &["link", "set", &bridge, "up"]);
            return net;
        }
        panic!("no free lab block of {BLOCKS}");
    }

    fn bridge(&self) -> String {
        format!("ctl{}", self.block)
    }

    /// The host's address on the test network: where the controller is reached.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 248, self.block, 1)
    }

    fn state_dir(&self) -> PathBuf {
        labs_dir().join(format!("block-{}", self.block))
    }

    fn netns_prefix(&self) -> String {
        format!("ctl-{}-", self.block)
    }

    /// Removes everything of this block. Each step may find nothing.
    fn clear(&self) {
        let state = self.state_dir();
        if let Ok(entries) = std::fs::read_dir(&state) {
            for node in entries.filter_map(|e| e.ok()) {
                clear_daemon(&node.path().join("lxd"));
            }
        }
        for ns in run("ip", &["netns", "list"])
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|ns| ns.starts_with(&self.netns_prefix()))
        {
            kill_all_in(ns);
            let _ = output("ip", &["netns", "delete", ns]);
        }
        let _ = output("ip", &["link", "delete", &self.bridge()]);
        unmount_under(&state);
        let _ = std::fs::remove_dir_all(&state);
    }
}

impl Drop for LabNet {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Kills every process left in namespace `ns` (an agent of a dead run, say).
fn kill_all_in(ns: &str) {
    for pid in run("ip", &["netns", "pids", ns]).split_whitespace() {
        if let Ok(pid) = pid.parse::<i32>() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The daemon's own client pointed at `lxd_dir`.
fn lxc_in(lxd_dir: &Path, args: &[&str]) -> Output {
    let mut lxc = Command::new("lxc");
    lxc.args(args).env("LXD_DIR", lxd_dir);
    crate::process::output_within(&mut lxc, crate::process::BOUND)
}

/// Deletes every instance of the daemon at `lxd_dir` and shuts it down, starting it first (on
/// the host: its namespace may be gone) when a dead run left it stopped with containers.
fn clear_daemon(lxd_dir: &Path) {
    if !lxd_dir.join("database").exists() {
        return;
    }
    let answers = || lxc_in(lxd_dir, &["query", "/1.0"]).status.success();
    let mut started = None;
    if !answers() {
        started = Command::new("setsid")
            .args(["lxd", "--group", "root"])
            .env("LXD_DIR", lxd_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        wait_ready(lxd_dir, Duration::from_secs(30));
    }
    let listed = lxc_in(lxd_dir, &["list", "--all-projects", "-f", "csv", "-c", "n"]);
    for name in String::from_utf8_lossy(&listed.stdout).lines() {
        let _ = lxc_in(lxd_dir, &["delete", "--force", name.trim()]);
    }
    let _ = Command::new("lxd")
        .args(["shutdown", "--timeout", "30"])
        .env("LXD_DIR", lxd_dir)
        .output();
    if let Some(mut child) = started {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn wait_ready(lxd_dir: &Path, within: Duration) {
    let _ = Command::new("lxd")
        .args(["waitready", "--timeout", &within.as_secs().to_string()])
        .env("LXD_DIR", lxd_dir)
        .output();
}

/// Unmounts whatever a daemon left mounted under `dir` (deepest first), so it can be removed.
fn unmount_under(dir: &Path) {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.to_string_lossy().to_string();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let _ = output("umount", &["-l", point]);
    }
}

impl Lab {
    /// A controller on the host (its own database), reachable on the test network, with
    /// `controller_env` (a short offline threshold, say); no nodes yet.
    pub async fn start(controller_env: &[(&str, &str)]) -> Self {
        let net = LabNet::claim();
        let cluster = Cluster::start_reachable_at(net.gateway(), controller_env).await;
        Lab {
            nodes: Vec::new(),
            cluster,
            agent_env: Vec::new(),
            net,
        }
    }

    /// A new node `name`: its namespace and address, an empty LXD daemon of its own (no image:
    /// it fetches the course image from the controller), and an agent enrolled with a join
    /// token as an admin on that host would. Returns once the controller has it `online`.
    pub async fn add_node(&mut self, name: &str) -> &mut LabNode {
        let k = self.nodes.len() as u8;
        assert!(k < 40, "at most 40 nodes a lab");
        let address = Ipv4Addr::new(10, 248, self.net.block, 10 + k);
        let netns = format!("{}{k}", self.net.netns_prefix());
        let (host_if, peer_if) = (
            format!("ctlv{}-{k}", self.net.block),
            format!("ctlp{}-{k}", self.net.block),
        );
        run("ip", &["netns", "add", &netns]);
        run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &peer_if,
            ],
        );
        run(
            "ip",
            &["link", "set", &host_if, "master", &self.net.bridge()],
        );
        run("ip", &["link", "set", &host_if, "up"]);
        run("ip", &["link", "set", &peer_if, "netns", &netns]);
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", netns.as_str()];
            all.extend_from_slice(args);
            run("ip", &all);
        };
        inside(&["link", "set", &peer_if, "name", "eth0"]);
        inside(&["addr", "add", &format!("{address}/24"), "dev", "eth0"]);
        inside(&["link", "set", "eth0", "up"]);
        inside(&["link", "set", "lo", "up"]);

        let dir = self.net.state_dir().join(name);
        std::fs::create_dir_all(dir.join("lxd")).expect("node dir");
        let mut node = LabNode {
            name: name.to_string(),
            address,
            netns,
            dir,
            daemon: None,
            agent: None,
            agent_env: self.agent_env.clone(),
        };
        node.start_daemon();
        node.lxc(&["storage", "create", "cohort", "dir"]);
        node.lxc(&[
            "profile",
            "device",
            "add",
            "default",
            "root",
            "disk",
            "path=/",
            "pool=cohort",
        ]);
        self.join(&node).await;
        node.start_agent();
        self.nodes.push(node);
        self.cluster
            .wait_node_ready(name, Duration::from_secs(30))
            .await;
        self.nodes.last_mut().expect("just pushed")
    }

    /// `cohort-agent join` on the node, with a token naming the node's address.
    async fn join(&self, node: &LabNode) {
        let issued = self
            .cluster
            .admin(
                reqwest::Method::POST,
                "/nodes/tokens",
                Some(crate::bodies::to_json(&crate::bodies::join_token(
                    &node.name,
                    &[node.address.to_string()],
                ))),
            )
            .await;
        let token = issued["token"].as_str().expect("join token");
        let listen = format!("{}:{AGENT_PORT}", node.address);
        let url = format!("https://{listen}");
        let address = node.address.to_string();
        let state = node.state_dir();
        let out = node
            .inside(agent_binary().to_str().expect("utf-8 path"))
            .args(["join", token, "--state-dir"])
            .arg(&state)
            .args(["--listen", &listen, "--agent-url", &url])
            .args(["--ssh-host", &address, "--ssh-ports", SSH_PORTS])
            .args(["--lxd-project", "default", "--lxd-socket"])
            .arg(node.lxd_dir().join("unix.socket"))
            .output()
            .expect("run cohort-agent join");
        assert!(
            out.status.success(),
            "cohort-agent join on {} failed: {}{}",
            node.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn node(&mut self, name: &str) -> &mut LabNode {
        self.nodes
            .iter_mut()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no lab node {name}"))
    }

    /// Every node's agent log, for a failure's message.
    pub fn agent_logs(&self) -> String {
        self.nodes
            .iter()
            .map(|n| format!("--- {} ---\n{}", n.name, n.log()))
            .collect()
    }

    /// Waits for operation `op` (as the API answered it) and asserts it succeeded, with the
    /// controller's and agents' logs in the failure; the finished operation.
    pub async fn succeeds(&self, op: &serde_json::Value, within: Duration) -> serde_json::Value {
        let done = self
            .cluster
            .wait_operation(op["id"].as_str().expect("operation id"), within)
            .await;
        assert_eq!(
            done["status"],
            "success",
            "{done}\n{}\n{}",
            self.cluster.controller_log(),
            self.agent_logs()
        );
        done
    }
}

impl LabNode {
    /// A command run in the node's network namespace only (`nsenter --net`: unlike `ip netns
    /// exec` it keeps the host's mounts, and LXD needs the host's cgroup tree).
    fn inside(&self, program: &str) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", self.netns))
            .arg(program)
            .env("LXD_DIR", self.lxd_dir());
        cmd
    }

    pub fn lxd_dir(&self) -> PathBuf {
        self.dir.join("lxd")
    }

    /// The agent's state directory (key, certificates, downloads under `images/`).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("agent")
    }

    /// Runs `lxc` against the node's own daemon; panics with its stderr when it fails.
    pub fn lxc(&self, args: &[&str]) -> String {
        let out = lxc_in(&self.lxd_dir(), args);
        assert!(
            out.status.success(),
            "lxc {} on {} failed: {}",
            args.join(" "),
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs `lxc` against the node's own daemon; its output, whatever its status.
    pub fn lxc_output(&self, args: &[&str]) -> std::process::Output {
        lxc_in(&self.lxd_dir(), args)
    }

    fn start_daemon(&mut self) {
        let log = self.dir.join("lxd.log");
        let child = self
            .inside("lxd")
            .args(["--group", "root", "--logfile"])
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start lxd in the node's namespace");
        self.daemon = Some(child);
        wait_ready(&self.lxd_dir(), Duration::from_secs(30));
        assert!(
            lxc_in(&self.lxd_dir(), &["query", "/1.0"]).status.success(),
            "{}'s LXD daemon is not ready after 30 s: {}",
            self.name,
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    fn start_agent(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("agent.log"))
            .expect("agent log");
        let config = self.state_dir().join("agent.toml");
        let socket = self.lxd_dir().join("unix.socket");
        let child = self
            .inside(agent_binary().to_str().expect("utf-8 path"))
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("COHORT_LOG", "info,cohort_agent=debug")
            .env("COHORT_AGENT_NETWORK_MODE", "none")
            .env("COHORT_AGENT_LXD_SOCKET", &socket)
            .envs(self.agent_env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::from(log.try_clone().expect("log fd")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start cohort-agent in the node's namespace");
        self.agent = Some(child);
        // From the host, across the test network, as the controller will connect.
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect((self.address, AGENT_PORT)).is_err() {
            assert!(
                Instant::now() < deadline,
                "{}'s agent does not listen on {}:{AGENT_PORT} after 30 s:\n{}",
                self.name,
                self.address,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default()
    }

    /// Drops every packet between this node and the controller's host (both ways): a
    /// partition of the campus network, as the node sees it.
    pub fn partition(&self) {
        self.fault(&format!(
            "ip saddr {gw} drop",
            gw = Ipv4Addr::new(10, 248, self.address.octets()[2], 1)
        ));
    }

    /// Drops `percent` % of the packets on the node's link, chosen at random (both ways).
    pub fn lose(&self, percent: u8) {
        assert!(percent < 100, "a loss below 100 %");
        self.fault(&format!("numgen random mod 100 < {percent} drop"));
    }

    /// Installs `rule` on the node's input and output (replacing the fault there was).
    fn fault(&self, rule: &str) {
        self.heal();
        let output_rule = rule.replace("saddr", "daddr");
        let script = format!(
            "table inet {FAULT_TABLE} {{\n\
             chain input {{ type filter hook input priority -10; {rule}; }}\n\
             chain output {{ type filter hook output priority -10; {output_rule}; }}\n\
             }}\n"
        );
        let mut nft = self
            .inside("nft")
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run nft");
        use std::io::Write;
        nft.stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write nft rules");
        let out = nft.wait_with_output().expect("nft");
        assert!(
            out.status.success(),
            "nft in {}: {}\n{script}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Removes the fault, if any.
    pub fn heal(&self) {
        let _ = self
            .inside("nft")
            .args(["delete", "table", "inet", FAULT_TABLE])
            .output();
    }

    /// Kills the agent (-9).
    pub fn kill_agent(&mut self) {
        if let Some(mut child) = self.agent.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the agent (-9) and starts it again; the daemon runs on.
    pub fn restart_agent(&mut self) {
        self.kill_agent();
        self.start_agent();
    }

    /// The node's reboot: the agent dies, the daemon shuts down (stopping its containers as a
    /// host shutdown does), then both start again.
    pub fn reboot(&mut self) {
        self.kill_agent();
        let _ = self
            .inside("lxd")
            .args(["shutdown", "--timeout", "60"])
            .output();
        if let Some(mut child) = self.daemon.take() {
            let _ = child.wait();
        }
        self.start_daemon();
        self.start_agent();
    }
}

impl Drop for LabNode {
    fn drop(&mut self) {
        self.kill_agent();
        clear_daemon(&self.lxd_dir());
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        kill_all_in(&self.netns);
        let _ = output("ip", &["netns", "delete", &self.netns]);
    }
}
