//! [`ClusterNode`]: one enrolled node of a [`super::Cluster`], a real `cohort-agent serve`
//! process with its LXD project, SSH port range and state directory, killed and restarted at will.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{PortRange, TestLxd};

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
    /// A node not started yet: [`super::Cluster`] joins it, then spawns its agent.
    pub(super) fn new(
        name: &str,
        lxd: TestLxd,
        ssh_ports: PortRange,
        agent_port: u16,
        state_dir: PathBuf,
    ) -> Self {
        ClusterNode {
            name: name.to_string(),
            lxd,
            ssh_ports,
            agent_port,
            state_dir,
            child: None,
        }
    }

    pub(super) fn spawn(&mut self) {
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
