//! Issue 31's packages under a real systemd: a system container from `cohort/base` (Debian 12
//! with systemd as its init) gets the three `.deb`s that `scripts/package` builds. The
//! controller's service starts once `init` has made its CA, logs to the journal, comes back
//! after `kill -9`, is migrated and restarted by an upgrade, stops, and a purge leaves none of
//! the package's files (but keeps the lab's CA). The agent's service starts once the node has
//! joined, and waits for a daemon (this container runs none) without restarting. The container
//! has no network: its PostgreSQL is this machine's, reached through a proxy device on the
//! container's loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cohort_e2e::{TestDb, TestLxd};

const CONTAINER: &str = "pkg";

/// Builds the packages at `version` (debug binaries: the same code, built once for the tests).
fn build_packages(version: &str) -> Vec<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(repo.join("scripts/package"))
        .args(["--profile", "debug"])
        .env("COHORT_PACKAGE_VERSION", version)
        .current_dir(&repo)
        .output()
        .expect("run scripts/package");
    assert!(
        out.status.success(),
        "scripts/package: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let debs: Vec<PathBuf> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| repo.join(l.trim()))
        .collect();
    assert_eq!(debs.len(), 3, "three packages: {debs:?}");
    debs
}

struct Node {
    lxd: TestLxd,
}

impl Node {
    /// `sh -c CMD` in the container as root; returns (exit code, stdout + stderr).
    fn sh(&self, cmd: &str) -> (i32, String) {
        let out = self
            .lxd
            .lxc_output(&["exec", CONTAINER, "--", "sh", "-c", cmd]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// Like [`Node::sh`], asserting success; returns stdout and stderr.
    fn ok(&self, cmd: &str) -> String {
        let (code, text) = self.sh(cmd);
        assert_eq!(code, 0, "{cmd}: {text}");
        text
    }

    fn push(&self, files: &[PathBuf], dir: &str) {
        for file in files {
            let name = file.file_name().expect("file name").to_string_lossy();
            self.lxd.lxc(&[
                "file",
                "push",
                file.to_str().expect("utf-8 path"),
                &format!("{CONTAINER}{dir}/{name}"),
            ]);
        }
    }

    /// Waits (at most `within`) until `cmd` succeeds; returns its output.
    fn until(&self, cmd: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let (code, text) = self.sh(cmd);
            if code == 0 {
                return text;
            }
            assert!(Instant::now() < deadline, "{cmd} never succeeded: {text}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn main_pid(&self, unit: &str) -> String {
        self.ok(&format!("systemctl show -p MainPID --value {unit}"))
            .trim()
            .to_string()
    }
}

#[test]
fn the_packages_install_run_restart_upgrade_and_purge_under_systemd() {
    let _alone = crate::alone_blocking();
    let first = build_packages("0.1.0-1");
    let node = Node {
        lxd: TestLxd::new(),
    };
    node.lxd.lxc_create(&["launch", "cohort/base", CONTAINER]);
    node.until(
        "systemctl is-system-running | grep -Eq 'running|degraded'",
        Duration::from_secs(90),
    );
    // The host's PostgreSQL on the container's own loopback.
    node.lxd.lxc(&[
        "config",
        "device",
        "add",
        CONTAINER,
        "pg",
        "proxy",
        "listen=tcp:127.0.0.1:5432",
        "connect=tcp:127.0.0.1:5432",
        "bind=instance",
    ]);
    let libs: Vec<PathBuf> = std::fs::read_dir("/var/cache/cohort/debs")
        .expect("the libraries scripts/setup downloads")
        .map(|e| e.expect("entry").path())
        .collect();
    node.ok("mkdir -p /root/libs /root/v1 /root/v2");
    node.push(&libs, "/root/libs");
    node.push(&first, "/root/v1");
    node.ok("dpkg -i /root/libs/*.deb");
    node.ok("dpkg -i /root/v1/*.deb");

    // Installed, enabled, and waiting for init (its condition) rather than failing.
    assert_eq!(
        node.ok("systemctl is-enabled cohort-controller").trim(),
        "enabled"
    );
    assert_eq!(
        node.ok("systemctl is-enabled cohort-agent").trim(),
        "enabled"
    );
    assert_eq!(
        node.sh("systemctl is-active cohort-controller").1.trim(),
        "inactive"
    );
    assert_eq!(
        node.ok("stat -c '%U:%G %a' /etc/cohort/controller.toml")
            .trim(),
        "root:cohort 640"
    );
    assert_eq!(
        node.ok("stat -c '%U %a' /var/lib/cohort").trim(),
        "cohort 700"
    );

    let db = TestDb::new();
    node.ok(&format!(
        "printf '[database]\\nurl = \"{}\"\\n[server]\\nlisten = \"127.0.0.1:8443\"\\n' \
         > /etc/cohort/controller.toml",
        db.url()
    ));
    let init =
        node.ok("runuser -u cohort -- cohort-controller --config /etc/cohort/controller.toml init");
    let token = init
        .lines()
        .find_map(|l| l.strip_prefix("admin token (shown once): "))
        .unwrap_or_else(|| panic!("init prints the admin token: {init}"))
        .trim()
        .to_string();
    node.ok("systemctl start cohort-controller");
    node.until(
        "systemctl is-active cohort-controller",
        Duration::from_secs(30),
    );
    node.until(
        &format!(
            "cohort remote add lab https://127.0.0.1:8443 --token {token} --accept-certificate \
             || {{ journalctl -u cohort-controller --no-pager | tail -n 20; false; }}"
        ),
        Duration::from_secs(60),
    );
    node.until("cohort cluster list", Duration::from_secs(30));
    let journal = node.ok("journalctl -u cohort-controller --no-pager");
    assert!(journal.contains("serving the API"), "{journal}");
    let hardening =
        node.ok("systemctl show -p User -p NoNewPrivileges -p ProtectSystem cohort-controller");
    assert!(hardening.contains("User=cohort"), "{hardening}");
    assert!(hardening.contains("NoNewPrivileges=yes"), "{hardening}");
    assert!(hardening.contains("ProtectSystem=strict"), "{hardening}");

    // kill -9: systemd starts it again.
    let pid = node.main_pid("cohort-controller");
    node.ok(&format!("kill -9 {pid}"));
    node.until(
        &format!(
            "systemctl is-active cohort-controller && \
             [ \"$(systemctl show -p MainPID --value cohort-controller)\" != {pid} ] && \
             [ \"$(systemctl show -p MainPID --value cohort-controller)\" != 0 ]"
        ),
        Duration::from_secs(30),
    );
    node.until("cohort cluster list", Duration::from_secs(30));

    // The agent: joins this controller, then its service runs.
    let join = node.ok("cohort node add n1 --address 127.0.0.1");
    let join_token = join.lines().next().expect("the token's line").trim();
    node.ok(&format!(
        "cohort-agent join {join_token} --listen 127.0.0.1:9443 \
         --agent-url https://127.0.0.1:9443 --ssh-host 127.0.0.1"
    ));
    // This container runs no LXD: the agent waits for the daemon's socket, and stays up doing
    // so (one process, not a restart every 2 s) rather than failing.
    node.ok("systemctl start cohort-agent");
    node.until(
        "journalctl -u cohort-agent --no-pager | grep -q 'waiting for the daemon'",
        Duration::from_secs(30),
    );
    let waiting = node.main_pid("cohort-agent");
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        node.sh("systemctl is-active cohort-agent").1.trim(),
        "active"
    );
    assert_eq!(
        node.main_pid("cohort-agent"),
        waiting,
        "the agent restarted while it waited for the daemon: {}",
        node.sh("journalctl -u cohort-agent --no-pager | tail -n 10")
            .1
    );

    // An upgrade: the new packages migrate and restart the controller, restart the agent.
    let second = build_packages("0.1.0-2");
    node.push(&second, "/root/v2");
    let before = node.main_pid("cohort-controller");
    node.ok("dpkg -i /root/v2/*.deb");
    assert_eq!(
        node.ok("dpkg-query -W -f '${Version}' cohort-controller")
            .trim(),
        "0.1.0-2"
    );
    node.until(
        &format!(
            "systemctl is-active cohort-controller && \
             [ \"$(systemctl show -p MainPID --value cohort-controller)\" != {before} ]"
        ),
        Duration::from_secs(30),
    );
    // Bounded, but long enough for a loaded 2-core machine: the agent is restarted while the
    // controller it reports to restarts too, and systemd restarts it every 2 s until it runs.
    node.until(
        "systemctl is-active cohort-agent || \
         { journalctl -u cohort-agent --no-pager | tail -n 5; false; }",
        Duration::from_secs(90),
    );
    node.until("cohort cluster list", Duration::from_secs(30));

    node.ok("systemctl stop cohort-controller cohort-agent");
    assert_eq!(
        node.sh("systemctl is-active cohort-controller").1.trim(),
        "inactive"
    );

    // A purge: nothing of the packages is left; the lab's CA is.
    let purge = node.ok("dpkg --purge cohort-agent cohort-controller cohort-cli");
    assert!(
        purge.contains("/var/lib/cohort (the CA and image catalog) is kept"),
        "{purge}"
    );
    for path in [
        "/usr/bin/cohort-controller",
        "/usr/bin/cohort-agent",
        "/usr/bin/cohort",
        "/lib/systemd/system/cohort-controller.service",
        "/lib/systemd/system/cohort-agent.service",
        "/etc/cohort",
        "/etc/systemd/system/multi-user.target.wants/cohort-controller.service",
    ] {
        assert_eq!(node.sh(&format!("test -e {path}")).0, 1, "{path} is left");
    }
    let (_, units) = node
        .sh("systemctl list-unit-files cohort-controller.service cohort-agent.service --no-legend");
    assert_eq!(units.trim(), "", "unit files left");
    node.ok("test -f /var/lib/cohort/ca.crt");
}
