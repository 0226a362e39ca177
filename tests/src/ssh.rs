//! Real SSH: key pairs made by `ssh-keygen`, logins made by the `ssh` client in batch mode with a
//! throw-away known_hosts, so a test proves what a student with nothing but ssh would see.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// An ed25519 key pair in its own temp dir (with the known_hosts file the logins use).
pub struct SshKey {
    dir: tempfile::TempDir,
}

impl SshKey {
    pub fn generate() -> Self {
        let dir = tempfile::tempdir().expect("temp dir for ssh key");
        let key = dir.path().join("id_ed25519");
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "cohort-test", "-f"])
            .arg(&key)
            .output()
            .expect("run ssh-keygen (openssh-client; run scripts/setup)");
        assert!(out.status.success(), "ssh-keygen failed: {out:?}");
        SshKey { dir }
    }

    pub fn private_key(&self) -> PathBuf {
        self.dir.path().join("id_ed25519")
    }

    /// The public key line, as it goes into `authorized_keys`.
    pub fn public_key(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("id_ed25519.pub"))
            .expect("read public key")
            .trim()
            .to_string()
    }

    /// Forgets every host key seen so far, as a student does after their container is re-made
    /// (a new container has new host keys, which ssh would otherwise refuse).
    pub fn forget_hosts(&self) {
        let _ = std::fs::remove_file(self.known_hosts());
    }

    fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// Runs `cmd` as `user` on `host:port` with this key only; returns the ssh process output.
    pub fn run(&self, host: &str, port: u16, user: &str, cmd: &str) -> Output {
        ssh_command(
            host,
            port,
            user,
            &self.private_key(),
            &self.known_hosts(),
            "accept-new",
            cmd,
        )
    }

    /// Like `run`, from inside the network namespace `netns` (a client on another machine).
    pub fn run_in(&self, netns: &str, host: &str, port: u16, user: &str, cmd: &str) -> Output {
        ssh_command_in(
            Some(netns),
            host,
            port,
            user,
            &self.private_key(),
            &self.known_hosts(),
            "accept-new",
            cmd,
        )
    }

    /// Like `run`, but the host must prove it holds `host_key` (a `known_hosts` key such as
    /// `ssh-ed25519 AAAA...`): ssh is given only that key for `[host]:port` and
    /// `StrictHostKeyChecking=yes`, as a student who copied the line Cohort gave them.
    pub fn run_verified(
        &self,
        host: &str,
        port: u16,
        host_key: &str,
        user: &str,
        cmd: &str,
    ) -> Output {
        let known = self.dir.path().join(format!("verified_hosts_{port}"));
        std::fs::write(&known, format!("[{host}]:{port} {host_key}\n")).expect("write known_hosts");
        ssh_command(host, port, user, &self.private_key(), &known, "yes", cmd)
    }

    /// Like `run`, retrying while sshd is not yet answering (connection refused or reset), up to
    /// `deadline`. Authentication failures are returned at once.
    pub fn run_when_up(
        &self,
        host: &str,
        port: u16,
        user: &str,
        cmd: &str,
        deadline: Duration,
    ) -> Output {
        let start = Instant::now();
        loop {
            let out = self.run(host, port, user, cmd);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let not_up = out.status.code() == Some(255)
                && (stderr.contains("Connection refused")
                    || stderr.contains("Connection reset")
                    || stderr.contains("Connection closed")
                    || stderr.contains("kex_exchange_identification")
                    || stderr.contains("timed out"));
            if !not_up || start.elapsed() > deadline {
                return out;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `ssh` in batch mode: no password prompts, only the given identity, the given known_hosts and
/// `StrictHostKeyChecking` (`accept-new` or `yes`).
fn ssh_command(
    host: &str,
    port: u16,
    user: &str,
    key: &Path,
    known_hosts: &Path,
    host_check: &str,
    cmd: &str,
) -> Output {
    ssh_command_in(None, host, port, user, key, known_hosts, host_check, cmd)
}

/// [`ssh_command`] run inside the network namespace `netns` when one is given.
#[allow(clippy::too_many_arguments)]
fn ssh_command_in(
    netns: Option<&str>,
    host: &str,
    port: u16,
    user: &str,
    key: &Path,
    known_hosts: &Path,
    host_check: &str,
    cmd: &str,
) -> Output {
    let mut command = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ssh"]);
            c
        }
        None => Command::new("ssh"),
    };
    command
        .args(["-p", &port.to_string(), "-i"])
        .arg(key)
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            "PasswordAuthentication=no",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
            "-o",
        ])
        .arg(format!("StrictHostKeyChecking={host_check}"))
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        // A connection that goes silent ends the client within half a minute.
        .args(["-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=6"])
        .arg(format!("{user}@{host}"))
        .arg(cmd);
    crate::process::output_within(&mut command, crate::process::BOUND)
}
