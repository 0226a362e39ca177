//! `TestLxd`: an LXD project per test on the real daemon, sharing the default project's images
//! (so `cohort/base` is there) and profiles. Instances, custom volumes and the project go on
//! `Drop`; projects left by crashed processes go at first use. Driven with the real `lxc` client,
//! which keeps the harness independent of the agent's own LXD client under test.

use std::process::{Command, Output};
use std::sync::Once;

/// Prefix of every test project: `ct-<pid>-<n>`.
const PREFIX: &str = "ct-";

pub struct TestLxd {
    project: String,
}

/// Runs `lxc` with the given arguments; panics with its stderr when it fails.
pub fn lxc(args: &[&str]) -> String {
    let out = lxc_output(args);
    assert!(
        out.status.success(),
        "lxc {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `lxc` and returns its output whatever the exit status.
pub fn lxc_output(args: &[&str]) -> Output {
    Command::new("lxc")
        .args(args)
        .env("LXD_DIR", lxd_dir())
        .output()
        .expect("run lxc (is lxd-client installed? run scripts/setup)")
}

/// Deletes `name` of `project`, giving `lxc delete` at most `deadline`: LXD 5.0.2 now and then
/// never reports the end of a delete (seen in a test of many copies made and deleted at once:
/// the instance was gone, the client waited for ever). Past the deadline the client is killed,
/// and the instance must then be gone within another `deadline`.
pub fn delete_instance(project: &str, name: &str, deadline: std::time::Duration) {
    let secs = deadline.as_secs().max(1).to_string();
    let out = Command::new("timeout")
        .args([
            "-k",
            "5",
            &secs,
            "lxc",
            "--project",
            project,
            "delete",
            "--force",
            name,
        ])
        .env("LXD_DIR", lxd_dir())
        .output()
        .expect("run timeout lxc");
    if out.status.success() {
        return;
    }
    let path = format!("/1.0/instances/{name}?project={project}");
    let until = std::time::Instant::now() + deadline;
    while lxc_output(&["query", &path]).status.success() {
        assert!(
            std::time::Instant::now() < until,
            "lxc delete {name} failed ({}) and {name} is still there: {}",
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

fn remove_leftovers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for name in query_names("/1.0/projects") {
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(crate::pid_is_dead) {
                purge_project(&name);
            }
        }
    });
}

fn query_names(path: &str) -> Vec<String> {
    let out = lxc_output(&["query", path]);
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
fn purge_project(project: &str) {
    // Only a project with images of its own may have its images deleted: in one that shares
    // the default project's, the listing and the deletes reach the default project.
    if project_has_own_images(project) {
        for fingerprint in query_names(&format!("/1.0/images?project={project}")) {
            let _ = lxc_output(&["image", "delete", "--project", project, &fingerprint]);
        }
    }
    for name in query_names(&format!("/1.0/instances?project={project}")) {
        let _ = lxc_output(&["delete", "--force", "--project", project, &name]);
    }
    for name in query_names(&format!(
        "/1.0/storage-pools/cohort/volumes/custom?project={project}"
    )) {
        let _ = lxc_output(&[
            "storage",
            "volume",
            "delete",
            "cohort",
            &name,
            "--project",
            project,
        ]);
    }
    let _ = lxc_output(&["project", "delete", project]);
}

impl TestLxd {
    /// A new project `ct-<pid>-<n>` that uses the default project's images and profiles.
    pub fn new() -> Self {
        Self::create(false)
    }

    /// A new project with images of its own (`features.images=true`): it starts with none, so
    /// an agent working in it must fetch every image it uses.
    pub fn with_own_images() -> Self {
        Self::create(true)
    }

    fn create(own_images: bool) -> Self {
        let out = lxc_output(&["query", "/1.0"]);
        assert!(
            out.status.success(),
            "LXD does not answer at {}: {}; run scripts/setup",
            socket_path(),
            String::from_utf8_lossy(&out.stderr)
        );
        remove_leftovers();
        let project = format!("{PREFIX}{}", crate::unique_suffix());
        lxc(&[
            "project",
            "create",
            &project,
            "-c",
            &format!("features.images={own_images}"),
            "-c",
            "features.profiles=false",
        ]);
        TestLxd { project }
    }

    pub fn project(&self) -> &str {
        &self.project
    }

    /// `lxc --project <this> ARGS...`, panicking on failure.
    pub fn lxc(&self, args: &[&str]) -> String {
        let mut all = vec!["--project", self.project.as_str()];
        all.extend_from_slice(args);
        lxc(&all)
    }

    /// `lxc --project <this> ARGS...`, whatever the exit status.
    pub fn lxc_output(&self, args: &[&str]) -> Output {
        let mut all = vec!["--project", self.project.as_str()];
        all.extend_from_slice(args);
        lxc_output(&all)
    }

    /// `lxc --project <this> ARGS...` (an `init` or `launch`) under the daemon's start lock, the
    /// one every `cohort-agent` takes: LXD 5.0.2 gives a starting container an idmap outside
    /// /etc/subuid while another container on the daemon exists unstarted, so creations must
    /// not overlap starts.
    pub fn lxc_create(&self, args: &[&str]) -> String {
        use sha2::{Digest, Sha256};
        let socket = socket_path();
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
        query_names(&format!("/1.0/instances?project={}", self.project))
    }
}

impl Default for TestLxd {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for TestLxd {
    fn drop(&mut self) {
        purge_project(&self.project);
    }
}

/// Whether the project keeps images of its own (`features.images=true`).
fn project_has_own_images(project: &str) -> bool {
    let out = lxc_output(&["query", &format!("/1.0/projects/{project}")]);
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
