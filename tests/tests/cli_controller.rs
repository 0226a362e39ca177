//! `cohort` against a real controller (`cohort-controller init` + `serve` on a test database and
//! a free port): remotes pin the controller's own certificate, people and tokens, nodes' join
//! tokens, images, queued instances and operations, and the controller's errors as lxc's.
//! Both binaries come from the same target directory (`cargo build` builds them; `cargo test
//! --workspace` too).

mod cli_support;

use base64::Engine;
use cli_support::{base_image_tarball, Cli, Controller};

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
        info.contains("user: labadmin") && info.contains("role: admin"),
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
