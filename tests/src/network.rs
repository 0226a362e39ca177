//! Networks a test makes for itself: a node network (an LXD bridge the agent under test creates,
//! `ctn<B>` on `10.250.<B>.0/24`) and network namespaces joined to the host by veth pairs on
//! `10.249.<B>.0/24` (one `/30` each), standing in for the internet and for students' machines.
//! Block `B` is claimed with an exclusive `flock` (like [`crate::PortRange`]), so no two tests in
//! any process share one; whatever a dead holder left in a block (bridge, its instances, the
//! agent's firewall chains, namespaces, links) is removed when the block is claimed, and
//! everything goes on `Drop`. Packets only ever go to these addresses.

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::{Command, Output};

use cohort_agent::network::{firewall, NetworkMode};
use cohort_agent::AgentConfig;
use nix::fcntl::{Flock, FlockArg};

const BLOCKS: u8 = 200;

/// A claimed block: the node network's name and subnet, and the namespaces made in it.
pub struct TestNetwork {
    block: u8,
    namespaces: u8,
    _lock: Flock<File>,
}

/// A network namespace joined to the host: `host` on the host's end, `address` inside.
pub struct Netns {
    pub name: String,
    pub address: Ipv4Addr,
    pub host: Ipv4Addr,
}

/// Runs a command; panics with its stderr when it fails.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = output(program, args);
    assert!(
        out.status.success(),
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns its output whatever the exit status.
pub(crate) fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("LXD_DIR", crate::lxd::lxd_dir())
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

impl TestNetwork {
    /// Claims a free block and clears what a dead holder left in it.
    pub fn claim() -> Self {
        let dir = std::env::temp_dir().join("cohort-test-networks");
        std::fs::create_dir_all(&dir).expect("network lock dir");
        let start = (std::process::id() % u32::from(BLOCKS)) as u8;
        for i in 0..BLOCKS {
            let block = ((u16::from(start) + u16::from(i)) % u16::from(BLOCKS)) as u8;
            let file = File::create(dir.join(format!("block-{block}"))).expect("lock file");
            let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
                continue;
            };
            let net = TestNetwork {
                block,
                namespaces: 0,
                _lock: lock,
            };
            net.clear();
            return net;
        }
        panic!("no free test network block of {BLOCKS}");
    }

    /// The block's number, which other networks a test makes in it name themselves by.
    pub fn block(&self) -> u8 {
        self.block
    }

    /// The bridge's (and LXD network's) name.
    pub fn name(&self) -> String {
        format!("ctn{}", self.block)
    }

    pub fn subnet(&self) -> String {
        format!("10.250.{}.0/24", self.block)
    }

    /// The bridge's own address: the containers' gateway, and where their SSH forwards listen.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 250, self.block, 1)
    }

    /// Points an agent's config at this network (managed: the agent makes the bridge).
    pub fn configure(&self, config: &mut AgentConfig) {
        config.network.mode = NetworkMode::Managed;
        config.network.name = self.name();
        config.network.subnet = self.subnet().parse().expect("subnet");
        config.network.ssh_address = Some(self.gateway());
    }

    /// A new namespace joined to the host by a veth pair on its own `/30`, with a default route
    /// through the host (so it reaches the node network's SSH forwards and the containers reach
    /// it through the bridge's NAT).
    pub fn netns(&mut self) -> Netns {
        let k = self.namespaces;
        assert!(k < 60, "at most 60 namespaces a test");
        self.namespaces += 1;
        let name = format!("ct-{}-{k}", self.block);
        let (host_if, peer_if) = (
            format!("ctv{}-{k}", self.block),
            format!("ctp{}-{k}", self.block),
        );
        let host = Ipv4Addr::new(10, 249, self.block, 4 * k + 1);
        let address = Ipv4Addr::new(10, 249, self.block, 4 * k + 2);
        run("ip", &["netns", "add", &name]);
        run(
            "ip",
            &[
                "link", "add", &host_if, "type", "veth", "peer", "name", &peer_if,
            ],
        );
        run("ip", &["link", "set", &peer_if, "netns", &name]);
        run(
            "ip",
            &["addr", "add", &format!("{host}/30"), "dev", &host_if],
        );
        run("ip", &["link", "set", &host_if, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", name.as_str()];
            all.extend_from_slice(args);
            run("ip", &all);
        };
        inside(&["addr", "add", &format!("{address}/30"), "dev", &peer_if]);
        inside(&["link", "set", &peer_if, "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", &host.to_string()]);
        Netns {
            name,
            address,
            host,
        }
    }

    /// Removes everything of this block: the bridge (after the instances on it), the agent's
    /// chains for it, the namespaces and their links. Each step may find nothing.
    fn clear(&self) {
        let name = self.name();
        // On whichever daemon the agent under test made it.
        for daemon in [crate::lxd::TestDaemon::Lxd, crate::lxd::TestDaemon::Incus] {
            self.clear_on(daemon, &name);
        }
        self.clear_host(&name);
    }

    /// The bridge `name` on `daemon`, after the instances on it.
    fn clear_on(&self, daemon: crate::lxd::TestDaemon, name: &str) {
        if let Some(net) = managed_network(daemon, name) {
            for url in net["used_by"].as_array().into_iter().flatten() {
                let Some(url) = url.as_str() else { continue };
                let (path, query) = url.split_once('?').unwrap_or((url, ""));
                let instance = path.rsplit('/').next().unwrap_or_default();
                let project = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("project="))
                    .unwrap_or("default");
                if path.starts_with("/1.0/instances/") {
                    crate::lxd::delete_instance_on(
                        daemon,
                        project,
                        instance,
                        std::time::Duration::from_secs(60),
                    );
                }
            }
            delete_bridge(daemon, name);
        }
    }

    /// The agent's chains for `name`, the namespaces, their links and a bridge no daemon holds.
    fn clear_host(&self, name: &str) {
        let mut nft = Command::new("nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("run nft");
        use std::io::Write;
        nft.stdin
            .take()
            .expect("stdin")
            .write_all(firewall::removal_script(name).as_bytes())
            .expect("write nft script");
        let _ = nft.wait();
        let namespaces = run("ip", &["netns", "list"]);
        let prefix = format!("ct-{}-", self.block);
        for ns in namespaces
            .lines()
            .filter_map(|l| l.split_whitespace().next())
        {
            if ns.starts_with(&prefix) {
                let _ = output("ip", &["netns", "delete", ns]);
            }
        }
        // The bridge itself where no daemon holds it (each was asked to delete it first): a daemon
        // would see it as a host interface and refuse to make its own, leaving the agent under
        // test without a node network.
        let orphan = || {
            [crate::lxd::TestDaemon::Lxd, crate::lxd::TestDaemon::Incus]
                .into_iter()
                .all(|daemon| !manages(daemon, name))
        };
        let links = run("ip", &["-o", "link", "show"]);
        let veth = format!("ctv{}-", self.block);
        for link in links.lines().filter_map(|l| l.split(':').nth(1)) {
            let link = link.trim().split('@').next().unwrap_or_default();
            if link.starts_with(&veth) || (link == name && orphan()) {
                let _ = output("ip", &["link", "delete", link]);
            }
        }
    }
}

/// The network `name` as `daemon` holds it; `None` where it has none, or sees only the other
/// daemon's bridge (an interface it does not manage).
fn managed_network(daemon: crate::lxd::TestDaemon, name: &str) -> Option<serde_json::Value> {
    let out = daemon.output(&["query", &format!("/1.0/networks/{name}")]);
    let net: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    (out.status.success() && net["managed"] == true).then_some(net)
}

fn manages(daemon: crate::lxd::TestDaemon, name: &str) -> bool {
    managed_network(daemon, name).is_some()
}

impl Netns {
    /// Runs `program args` inside the namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", self.name.as_str(), program];
        all.extend_from_slice(args);
        output("ip", &all)
    }
}

impl Drop for TestNetwork {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Deletes the bridge `name` on `daemon`. A daemon lists a bridge's children and then looks each
/// up; the veth of an instance deleted just before goes away a moment later, and the lookup of a
/// link that has gone fails the delete (Incus 6.0: "Failed to delete bridge children interfaces:
/// … Device "veth…" does not exist"). So a failed delete is asked again, at most 20 times half a
/// second apart. Run from a `Drop`: a test already failing gets the last error on stderr rather
/// than a second panic, which would abort the whole test binary.
fn delete_bridge(daemon: crate::lxd::TestDaemon, name: &str) {
    let args = ["network", "delete", name];
    let mut out = daemon.output(&args);
    for _ in 0..20 {
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || stderr.contains("not found") {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        out = daemon.output(&args);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || stderr.contains("not found") {
        return;
    }
    let message = format!("{daemon:?}: network delete {name} failed: {stderr}");
    if std::thread::panicking() {
        eprintln!("{message}");
    } else {
        panic!("{message}");
    }
}
