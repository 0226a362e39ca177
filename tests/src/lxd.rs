//! `TestLxd`: a project per test on a real daemon (LXD by default, or Incus beside it: see
//! [`TestDaemon`]), sharing the default project's images (so `cohort/base` is there) and
//! profiles. Instances, custom volumes and the project go on `Drop`; projects left by crashed
//! processes go at first use. Driven with the daemon's real client (`lxc` or `incus`), which
//! keeps the harness independent of the agent's own client under test.

use std::process::{Command, Output};
use std::sync::Once;

/// Prefix of every test project: `ct-<pid>-<n>`.
const PREFIX: &str = "ct-";

/// The daemon a test drives; `scripts/setup` starts both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestDaemon {
    /// LXD 5.0 (`LXD_DIR`, else Debian's or the snap's directory), driven with `lxc`.
    Lxd,
    /// Incus 6.0 (`INCUS_DIR`, else `/var/lib/incus`), driven with `incus`.
    Incus,
}

impl TestDaemon {
    /// The daemon's directory.
    pub fn dir(self) -> String {
        match self {
            TestDaemon::Lxd => lxd_dir(),
            TestDaemon::Incus => {
                std::env::var("INCUS_DIR").unwrap_or_else(|_| "/var/lib/incus".into())
            }
        }
    }

    pub fn socket_path(self) -> String {
        format!("{}/unix.socket", self.dir())
    }

    /// The daemon's own command line client, pointed at its directory.
    pub fn client(self) -> Command {
        let (program, var) = match self {
            TestDaemon::Lxd => ("lxc", "LXD_DIR"),
            TestDaemon::Incus => ("incus", "INCUS_DIR"),
        };
        let mut cmd = Command::new(program);
        cmd.env(var, self.dir());
        cmd
    }

    /// Runs the client; panics with its stderr when it fails. A command refused because the
    /// instance is busy with an operation of LXD's own (an `update` still settling after a
    /// create, say) is asked again, as the agent does, at most 20 times a quarter second apart.
    pub fn run(self, args: &[&str]) -> String {
        let mut out = self.output(args);
        for _ in 0..20 {
            if out.status.success()
                || !String::from_utf8_lossy(&out.stderr).contains("is busy running")
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
            out = self.output(args);
        }
        assert!(
            out.status.success(),
            "{self:?} client {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs the client and returns its output whatever the exit status.
    pub fn output(self, args: &[&str]) -> Output {
        crate::process::output_within(self.client().args(args), crate::process::BOUND)
    }
}

pub struct TestLxd {
    project: String,
    daemon: TestDaemon,
    /// Ends the test binary should the test outlive [`crate::process::TEST_LIMIT`].
    _watchdog: crate::process::Watchdog,
}

/// Runs `lxc` with the given arguments; panics with its stderr when it fails.
pub fn lxc(args: &[&str]) -> String {
    TestDaemon::Lxd.run(args)
}

/// Runs `lxc` and returns its output whatever the exit status.
pub fn lxc_output(args: &[&str]) -> Output {
    TestDaemon::Lxd.output(args)
}

/// Deletes `name` of `project`, giving `lxc delete` at most `deadline`: LXD 5.0.2 now and then
/// never reports the end of a delete (seen in a test of many copies made and deleted at once:
/// the instance was gone, the client waited for ever). Past the deadline the client is killed,
/// and the instance must then be gone within another `deadline`.
pub fn delete_instance(project: &str, name: &str, deadline: std::time::Duration) {
    delete_instance_on(TestDaemon::Lxd, project, name, deadline)
}

/// [`delete_instance`] on the given daemon.
pub fn delete_instance_on(
    daemon: TestDaemon,
    project: &str,
    name: &str,
    deadline: std::time::Duration,
) {
    let secs = deadline.as_secs().max(1).to_string();
    let program = daemon.client().get_program().to_owned();
    let out = Command::new("timeout")
        .args(["-k", "5", &secs])
        .arg(&program)
        .args(["--project", project, "delete", "--force", name])
        .env("LXD_DIR", lxd_dir())
        .env("INCUS_DIR", TestDaemon::Incus.dir())
        .output()
        .expect("run timeout with the daemon's client");
    if out.status.success() {
        return;
    }
    let path = format!("/1.0/instances/{name}?project={project}");
    let until = std::time::Instant::now() + deadline;
    while daemon.output(&["query", &path]).status.success() {
        assert!(
            std::time::Instant::now() < until,
            "{daemon:?} delete {name} failed ({}) and {name} is still there: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The daemon's directory: `LXD_DIR`, else Debian's, else the snap's.
pub fn lxd_dir() -> String {
    if let Ok(dir) = std::env::var("LXD_DIR") {
        return dir;
    }
    ["/var/lib/lxd", "/var/snap/lxd/common/lxd"]
        .into_iter()
        .find(|d| std::path::Path::new(&format!("{d}/unix.socket")).exists())
        .unwrap_or("/var/lib/lxd")
        .to_string()
}

pub fn socket_path() -> String {
    format!("{}/unix.socket", lxd_dir())
}

fn remove_leftovers(daemon: TestDaemon) {
    static LXD: Once = Once::new();
    static INCUS: Once = Once::new();
    let once = match daemon {
        TestDaemon::Lxd => &LXD,
        TestDaemon::Incus => &INCUS,
    };
    once.call_once(|| {
        for name in query_names(daemon, "/1.0/projects") {
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(crate::pid_is_dead) {
                purge_project(daemon, &name);
            }
        }
    });
}

fn query_names(daemon: TestDaemon, path: &str) -> Vec<String> {
    let out = daemon.output(&["query", path]);
    if !out.status.success() {
        return Vec::new();
    }
    let urls: Vec<String> = serde_json::from_slice(&out.stdout).unwrap_or_default();
    urls.iter()
        .filter_map(|u| u.split('?').next())
        .filter_map(|u| u.rsplit('/').next())
        .map(str::to_string)
        .collect()
}

/// Deletes everything in a project, then the project.
fn purge_project(daemon: TestDaemon, project: &str) {
    // Only a project with images of its own may have its images deleted: in one that shares
    // the default project's, the listing and the deletes reach the default project.
    if project_has_own_images(daemon, project) {
        for fingerprint in query_names(daemon, &format!("/1.0/images?project={project}")) {
            let _ = daemon.output(&["image", "delete", "--project", project, &fingerprint]);
        }
    }
    for name in query_names(daemon, &format!("/1.0/instances?project={project}")) {
        let _ = daemon.output(&["delete", "--force", "--project", project, &name]);
    }
    for name in query_names(
        daemon,
        &format!("/1.0/storage-pools/cohort/volumes/custom?project={project}"),
    ) {
        let _ = daemon.output(&[
            "storage",
            "volume",
            "delete",
            "cohort",
            &name,
            "--project",
            project,
        ]);
    }
    let _ = daemon.output(&["project", "delete", project]);
}

impl TestLxd {
    /// A new project `ct-<pid>-<n>` that uses the default project's images and profiles.
    pub fn new() -> Self {
        Self::create(TestDaemon::Lxd, false)
    }

    /// A new project like [`TestLxd::new`]'s on the given daemon.
    pub fn on(daemon: TestDaemon) -> Self {
        Self::create(daemon, false)
    }

    /// A new project with images of its own (`features.images=true`): it starts with none, so
    /// an agent working in it must fetch every image it uses.
    pub fn with_own_images() -> Self {
        Self::create(TestDaemon::Lxd, true)
    }

    fn create(daemon: TestDaemon, own_images: bool) -> Self {
        let out = daemon.output(&["query", "/1.0"]);
        assert!(
            out.status.success(),
            "{daemon:?} does not answer at {}: {}; run scripts/setup",
            daemon.socket_path(),
            String::from_utf8_lossy(&out.stderr)
        );
        remove_leftovers(daemon);
        let project = format!("{PREFIX}{}", crate::unique_suffix());
        daemon.run(&[
            "project",
            "create",
            &project,
            "-c",
            &format!("features.images={own_images}"),
            "-c",
            "features.profiles=false",
        ]);
        TestLxd {
            project,
            daemon,
            _watchdog: crate::process::Watchdog::arm(),
        }
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    /// The daemon this project lives on.
    pub fn daemon(&self) -> TestDaemon {
        self.daemon
    }

    /// `lxc --project <this> ARGS...`, panicking on failure.
    pub fn lxc(&self, args: &[&str]) -> String {
        let mut all = vec!["--project", self.project.as_str()];
        all.extend_from_slice(args);
        self.daemon.run(&all)
    }

    /// `lxc --project <this> ARGS...`, whatever the exit status.
    pub fn lxc_output(&self, args: &[&str]) -> Output {
        let mut all = vec!["--project", self.project.as_str()];
        all.extend_from_slice(args);
        self.daemon.output(&all)
    }

    /// `lxc --project <this> ARGS...` (an `init` or `launch`) under the daemon's start lock, the
    /// one every `cohort-agent` takes: LXD 5.0.2 gives a starting container an idmap outside
    /// /etc/subuid while another container on the daemon exists unstarted, so creations must
    /// not overlap starts.
    pub fn lxc_create(&self, args: &[&str]) -> String {
        use sha2::{Digest, Sha256};
        let socket = self.daemon.socket_path();
        let tag = hex::encode(&Sha256::digest(socket.as_bytes())[..8]);
        let path = std::env::temp_dir().join(format!("cohort-lxd-start-{tag}.lock"));
        let file = std::fs::File::create(&path).expect("start lock file");
        let _lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| e)
            .expect("start lock");
        self.lxc(args)
    }

    /// Names of the instances in this project (one recursive-free query).
    pub fn instance_names(&self) -> Vec<String> {
        query_names(
            self.daemon,
            &format!("/1.0/instances?project={}", self.project),
        )
    }
}

impl Default for TestLxd {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestLxd {
    fn drop(&mut self) {
        purge_project(self.daemon, &self.project);
    }
}

/// Whether the project keeps images of its own (`features.images=true`).
fn project_has_own_images(daemon: TestDaemon, project: &str) -> bool {
    let out = daemon.output(&["query", &format!("/1.0/projects/{project}")]);
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .is_some_and(|p| p["config"]["features.images"] == "true")
}

/// Whether an LXD project of this name exists (harness self-tests use it).
pub fn project_exists(name: &str) -> bool {
    lxc_output(&["query", &format!("/1.0/projects/{name}")])
        .status
        .success()
}

/// The Python of the virtualenv scripts/setup installs pylxd (and pytest, for pylxd's own
/// integration suite) into.
pub fn pylxd_python() -> std::path::PathBuf {
    let python = std::path::Path::new("/opt/cohort-pylxd/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup, which installs pylxd there",
        python.display()
    );
    python.to_path_buf()
}
