//! `PrivatePg`: a PostgreSQL cluster of a test's own (initdb + pg_ctl from the server package)
//! in a temp dir on a free loopback port, so a test may stop and start the database under a
//! running controller without touching anyone else's. PostgreSQL refuses to run as root, so as
//! root the server runs as the `postgres` user. Stopped (immediately) on `Drop`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian's PostgreSQL 15 server binaries live.
pub const PG_BIN: &str = "/usr/lib/postgresql/15/bin";

pub struct PrivatePg {
    dir: tempfile::TempDir,
    pub port: u16,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl PrivatePg {
    /// initdb, start, and a database `cohort` owned by role `cohort` (trust auth on loopback).
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("cohort-pg-")
            .tempdir()
            .expect("pg dir");
        if nix::unistd::geteuid().is_root() {
            let pg = nix::unistd::User::from_name("postgres")
                .expect("look up postgres")
                .expect("a postgres user (the server package makes it)");
            nix::unistd::chown(dir.path(), Some(pg.uid), Some(pg.gid)).expect("chown pg dir");
        }
        let pg = PrivatePg {
            dir,
            port: free_port(),
        };
        pg.ok(
            "initdb",
            &[
                "-D",
                &pg.data(),
                "-U",
                "cohort",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        pg.start_server();
        pg.ok(
            "createdb",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &pg.port.to_string(),
                "-U",
                "cohort",
                "cohort",
            ],
        );
        pg
    }

    pub fn url(&self) -> String {
        format!("postgres://cohort@127.0.0.1:{}/cohort", self.port)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// Runs a server binary (as `postgres` when we are root).
    fn run(&self, bin: &str, args: &[&str]) -> Output {
        let path = Path::new(PG_BIN).join(bin);
        let mut cmd = if nix::unistd::geteuid().is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        cmd.args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap_or_else(|e| panic!("run {bin}: {e}"))
    }

    fn ok(&self, bin: &str, args: &[&str]) {
        let out = self.run(bin, args);
        assert!(
            out.status.success(),
            "{bin} {args:?}: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.log()).unwrap_or_default()
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start_server(&self) {
        let options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.log().display().to_string();
        self.ok(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server (`fast`: connections are cut, as in a restart).
    pub fn stop_server(&self) {
        self.ok("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }
}

impl Drop for PrivatePg {
    fn drop(&mut self) {
        let _ = self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }
}
