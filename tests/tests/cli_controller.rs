//! `cohort` against a real controller (`cohort-controller init` + `serve` on a test database and
//! a free port): remotes pin the controller's own certificate, people and tokens, nodes' join
//! tokens, images, queued instances and operations, and the controller's errors as lxc's.
//! Both binaries come from the same target directory (`cargo build` builds them; `cargo test
//! --workspace` too).

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use cohort_e2e::{lxd, PortRange, TestDb};

/// A binary of this workspace, next to the test executable's `deps` directory.
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable");
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p cohort-cli -p cohort-controller` first",
        path.display()
    );
    path
}

/// A controller serving HTTPS on 127.0.0.1 with its own CA, database and state directory.
struct Controller {
    url: String,
    admin_token: String,
    state: tempfile::TempDir,
    child: Child,
    _db: TestDb,
    _ports: PortRange,
}

impl Controller {
    fn start() -> Self {
        let db = TestDb::new();
        let ports = PortRange::claim();
        let state = tempfile::tempdir().expect("state dir");
        let listen = format!("127.0.0.1:{}", ports.port(0));
        let env = |cmd: &mut Command| {
            cmd.env("DATABASE_URL", db.url())
                .env("COHORT_STATE_DIR", state.path())
                .env("COHORT_LISTEN", &listen)
                .env("COHORT_SERVER_NAMES", "127.0.0.1")
                .env("RUST_LOG", "warn");
        };
        let mut init = Command::new(binary("cohort-controller"));
        init.args(["init", "--admin", "admin"]);
        env(&mut init);
        let out = init.output().expect("run cohort-controller init");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "init: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let admin_token = stdout
            .lines()
            .find_map(|l| l.strip_prefix("admin token (shown once): "))
            .expect("init prints the admin token")
            .to_string();
        let log = std::fs::File::create(state.path().join("serve.log")).expect("log");
        let mut serve = Command::new(binary("cohort-controller"));
        serve.arg("serve").stdout(Stdio::null()).stderr(log);
        env(&mut serve);
        let child = serve.spawn().expect("run cohort-controller serve");
        let started = Instant::now();
        while std::net::TcpStream::connect(&listen).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "controller did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Controller {
            url: format!("https://{listen}"),
            admin_token,
            state,
            child,
            _db: db,
            _ports: ports,
        }
    }

    /// SHA-256 of the server certificate `init` wrote, as the CLI shows fingerprints.
    fn server_fingerprint(&self) -> String {
        let pem = std::fs::read_to_string(self.state.path().join("server.crt")).expect("cert");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .expect("PEM body");
        cohort_cli::tls::fingerprint(&der)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `cohort` binary with a configuration of its own.
struct Cli {
    conf: tempfile::TempDir,
}

impl Cli {
    /// A client with the controller added as remote `lab` with the admin token.
    fn admin_of(controller: &Controller) -> Self {
        let cli = Cli {
            conf: tempfile::tempdir().expect("conf dir"),
        };
        cli.ok(&[
            "remote",
            "add",
            "lab",
            &controller.url,
            "--token",
            &controller.admin_token,
            "--accept-certificate",
        ]);
        cli
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(binary("cohort"))
            .args(args)
            .env("COHORT_CONF", self.conf.path())
            .stdin(Stdio::null())
            .output()
            .expect("run cohort")
    }

    /// Runs and returns stdout; panics with stderr on failure.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "cohort {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs expecting lxc's failure: exit 1 and `Error: <message>` on stderr.
    fn fails(&self, args: &[&str], message: &str) {
        let out = self.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(1),
            "cohort {}: {stderr}",
            args.join(" ")
        );
        assert!(
            stderr.starts_with("Error: ") && stderr.contains(message),
            "cohort {}: expected {message:?} in {stderr:?}",
            args.join(" ")
        );
    }
}

#[test]
fn remote_add_pins_the_controllers_certificate_and_checks_the_token() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    let config = std::fs::read_to_string(cli.conf.path().join("config.yml")).unwrap();
    assert!(
        config.contains(&format!("fingerprint: {}", controller.server_fingerprint())),
        "{config}"
    );
    let info = cli.ok(&["info"]);
    assert!(
        info.contains("user: admin") && info.contains("role: admin"),
        "{info}"
    );

    let other = Cli {
        conf: tempfile::tempdir().unwrap(),
    };
    let url = &controller.url;
    let add = [
        "remote",
        "add",
        "lab",
        url,
        "--token",
        "cohort_wrong",
        "--accept-certificate",
    ];
    other.fails(&add, "");
    assert!(
        !other.conf.path().join("config.yml").exists(),
        "a refused token saves nothing"
    );
}

#[test]
fn users_tokens_and_roles() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    cli.ok(&[
        "user",
        "create",
        "bob",
        "--role",
        "instructor",
        "--name",
        "Bob B",
    ]);
    let users = cli.ok(&["user", "list", "-f", "csv"]);
    assert!(
        users
            .lines()
            .any(|l| l.starts_with("bob,instructor,Bob B,")),
        "{users}"
    );

    let token = cli.ok(&["user", "token", "bob"]).trim().to_string();
    let url = &controller.url;
    cli.ok(&[
        "remote",
        "add",
        "bob",
        url,
        "--token",
        &token,
        "--accept-certificate",
    ]);
    let info = cli.ok(&["info", "bob:"]);
    assert!(
        info.contains("user: bob") && info.contains("role: instructor"),
        "{info}"
    );
    // Instructors may not create users: the controller's refusal reaches the user as lxc's.
    cli.fails(&["user", "create", "bob:eve"], "");
    cli.fails(&["user", "create", "lab:bob"], "");
}

#[test]
fn node_add_prints_a_join_token_for_the_agent() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    let token = cli.ok(&["-q", "node", "add", "gpu1"]);
    let json = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .expect("the join token is base64");
    let token: serde_json::Value = serde_json::from_slice(&json).expect("of JSON");
    assert_eq!(token["node_name"], "gpu1");
    assert_eq!(token["controller_url"], controller.url.as_str());
    assert_eq!(
        cli.ok(&["node", "list", "-f", "csv"]),
        "",
        "not enrolled yet"
    );
    assert_eq!(cli.ok(&["cluster", "list", "-f", "json"]), "[]\n");
}

/// The unified tarball of `cohort/base` as the local LXD holds it.
fn base_image_tarball() -> PathBuf {
    let alias = lxd::lxc(&["query", "/1.0/images/aliases/cohort/base"]);
    let alias: serde_json::Value = serde_json::from_str(&alias).expect("alias JSON");
    let fingerprint = alias["target"].as_str().expect("alias target");
    let path = PathBuf::from(lxd::lxd_dir())
        .join("images")
        .join(fingerprint);
    assert!(path.exists(), "{} missing", path.display());
    assert!(
        !path.with_extension("rootfs").exists(),
        "cohort/base is a split image; the controller takes unified tarballs"
    );
    path
}

#[test]
fn images_queued_instances_and_operations() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    cli.fails(
        &["launch", "cohort/base", "c1"],
        "no image cohort/base (field: image)",
    );

    let tarball = base_image_tarball();
    let imported = cli.ok(&[
        "-q",
        "image",
        "import",
        tarball.to_str().unwrap(),
        "--alias",
        "cohort/base",
    ]);
    assert!(
        imported.starts_with("Image imported with fingerprint: "),
        "{imported}"
    );
    let images = cli.ok(&["image", "list", "-f", "csv"]);
    assert!(images.starts_with("cohort/base,"), "{images}");
    assert_eq!(
        cli.ok(&["image", "alias", "list", "lab:", "-f", "csv"])
            .lines()
            .count(),
        1
    );

    // No node is enrolled: the instance is queued and the create operation stays pending.
    let id = cli.ok(&["-q", "launch", "cohort/base", "lab:c1", "--no-wait"]);
    let id = id.trim();
    assert_eq!(cli.ok(&["list", "-f", "csv", "-c", "ns"]), "c1,QUEUED\n");
    let json: serde_json::Value =
        serde_json::from_str(&cli.ok(&["list", "-f", "json"])).expect("list json");
    assert_eq!(json[0]["name"], "c1");
    assert_eq!(json[0]["status"], "Queued");
    assert_eq!(json[0]["type"], "container");
    let shown = cli.ok(&["operation", "show", id]);
    assert!(
        shown.contains("kind: create_instance") && shown.contains("target: c1"),
        "{shown}"
    );
    assert!(cli.ok(&["operation", "list", "-f", "csv"]).contains(id));
    let config = cli.ok(&["config", "show", "c1"]);
    assert!(config.contains("limits.cpu: '1'") && config.contains("limits.memory: 1024MiB"));
    assert_eq!(
        cli.ok(&["config", "get", "c1", "limits.memory"]),
        "1024MiB\n"
    );
    assert!(cli
        .ok(&["info", "c1"])
        .starts_with("Name: c1\nStatus: QUEUED\nType: container\n"));
    cli.fails(&["exec", "c1", "--", "true"], "queued");

    cli.ok(&["delete", "-f", "c1"]);
    assert_eq!(cli.ok(&["list", "-f", "csv", "-c", "n"]), "");
    cli.fails(&["info", "c1"], "instance c1 not found");
    let fingerprint = imported.trim().rsplit(' ').next().unwrap();
    cli.ok(&["image", "delete", &fingerprint[..12]]);
    assert_eq!(cli.ok(&["image", "list", "-f", "csv"]), "");
}
