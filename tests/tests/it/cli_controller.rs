//! `cohort` against a real controller (`cohort-controller init` + `serve` on a test database and
//! a free port): remotes pin the controller's own certificate, people and tokens, nodes' join
//! tokens, images, queued instances and operations, and the controller's errors as lxc's.
//! Both binaries come from the same target directory (`cargo build` builds them; `cargo test
//! --workspace` too).

use crate::cli_support;

use base64::Engine;
use cli_support::{base_image_tarball, Cli, Controller, ADMIN};

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

/// `cohort user token list|revoke`, `--expires-in-days`, `cohort user disable|enable|delete`.
#[test]
fn tokens_are_listed_and_revoked_and_users_disabled_and_deleted() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    cli.ok(&["user", "create", "sam"]);
    cli.fails(
        &["user", "token", "sam", "--expires-in-days", "0"],
        "expires_in_days",
    );
    let token = cli.ok(&[
        "user",
        "token",
        "sam",
        "--name",
        "laptop",
        "--expires-in-days",
        "7",
    ]);
    let listed = cli.ok(&["user", "token", "list", "sam", "-f", "csv"]);
    let row = listed
        .lines()
        .find(|l| l.contains(",laptop,"))
        .unwrap_or_else(|| panic!("no laptop token in {listed:?}"));
    assert!(row.ends_with(",NO"), "{row}");
    assert!(!listed.contains(token.trim()), "the secret is never listed");
    let id = row.split(',').next().expect("id");
    let url = &controller.url;
    cli.ok(&[
        "remote",
        "add",
        "sam",
        url,
        "--token",
        token.trim(),
        "--accept-certificate",
    ]);
    cli.ok(&["info", "sam:"]);

    cli.ok(&["user", "disable", "sam"]);
    let users = cli.ok(&["user", "list", "-f", "csv"]);
    assert!(
        users
            .lines()
            .any(|l| l.starts_with("sam,") && !l.ends_with(',')),
        "sam is shown disabled: {users}"
    );
    cli.fails(&["info", "sam:"], "");
    cli.ok(&["user", "enable", "sam"]);
    cli.ok(&["info", "sam:"]);
    cli.fails(&["user", "disable", "labadmin"], "own account");

    cli.ok(&["user", "token", "revoke", "sam", id]);
    cli.fails(&["info", "sam:"], "");
    cli.fails(&["user", "token", "revoke", "sam", id], "not found");

    cli.ok(&["user", "delete", "sam", "--instances", "keep", "--force"]);
    let users = cli.ok(&["user", "list", "-f", "csv"]);
    assert!(!users.lines().any(|l| l.starts_with("sam,")), "{users}");
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
    let info = cli.ok(&["info", "c1"]);
    assert!(
        info.starts_with("Name: c1\nStatus: QUEUED\nType: container\n"),
        "{info}"
    );
    // Why it waits (issue 24).
    assert!(
        info.lines().any(|l| l == "Queued: no node is enrolled"),
        "{info}"
    );
    cli.fails(&["exec", "c1", "--", "true"], "queued");
    cli.fails(
        &["move", "c1", "--target", "nowhere"],
        "node nowhere not found (field: target)",
    );

    cli.ok(&["delete", "-f", "c1"]);
    assert_eq!(cli.ok(&["list", "-f", "csv", "-c", "n"]), "");
    cli.fails(&["info", "c1"], "instance c1 not found");
    let fingerprint = imported.trim().rsplit(' ').next().unwrap();
    cli.ok(&["image", "delete", &fingerprint[..12]]);
    assert_eq!(cli.ok(&["image", "list", "-f", "csv"]), "");
}

#[test]
fn audit_list_filters_pages_and_refuses_students() {
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    cli.ok(&["user", "create", "stu", "--role", "student"]);
    cli.ok(&["user", "create", "ted", "--role", "instructor"]);
    let token = cli.ok(&["user", "token", "stu"]).trim().to_string();

    // Newest first: the two creations and the token, then `init`'s admin.
    let csv = cli.ok(&["audit", "list", "-f", "csv"]);
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    let shape: Vec<(&str, &str, &str, &str)> =
        rows.iter().map(|r| (r[2], r[3], r[4], r[5])).collect();
    assert_eq!(
        shape[..3],
        [
            (ADMIN, "issue_token", "user", "stu"),
            (ADMIN, "create", "user", "ted"),
            (ADMIN, "create", "user", "stu"),
        ],
        "{csv}"
    );
    assert_eq!(
        shape.last(),
        Some(&("init", "create", "user", ADMIN)),
        "{csv}"
    );
    let table = cli.ok(&["audit", "list", "--object", "ted"]);
    assert!(
        table.contains(" ACTOR ") && table.contains("role=instructor"),
        "{table}"
    );
    assert_eq!(table.matches("| create ").count(), 1, "{table}");

    let json: serde_json::Value =
        serde_json::from_str(&cli.ok(&["audit", "list", "--action", "create", "-f", "json"]))
            .expect("json");
    let entries = json.as_array().expect("an array of entries");
    assert_eq!(entries.len(), 3, "{json}");
    for field in [
        "id",
        "actor",
        "action",
        "object_kind",
        "object",
        "detail",
        "created_at",
    ] {
        assert!(entries[0].get(field).is_some(), "{field} in {json}");
    }
    assert_eq!(entries[0]["object"], "ted");
    assert_eq!(entries[0]["detail"]["role"], "instructor");
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    assert_eq!(
        cli.ok(&["audit", "list", "--since", &future, "-f", "csv"]),
        ""
    );
    cli.fails(
        &["audit", "list", "--since", "yesterday"],
        "Invalid --since",
    );
    cli.fails(&["audit", "list", "--limit", "0"], "--limit");

    // More entries than the controller's largest page (1000): the CLI follows `next_before`.
    let config = cohort_cli::config::Config::load(&cli.conf.path().join("config.yml")).unwrap();
    let client = cohort_cli::client::Client::new(config.remote("lab").unwrap()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for chunk in 0..21 {
            let calls = (0..50).map(|i| {
                let client = client.clone();
                async move {
                    let body = cohort_e2e::bodies::new_user(
                        &format!("u{chunk}x{i}"),
                        cohort_e2e::bodies::Role::Student,
                    );
                    let _: serde_json::Value = client.post("/users", &body).await.expect("user");
                }
            });
            futures_util::future::join_all(calls).await;
        }
    });
    let all = cli.ok(&["audit", "list", "--limit", "5000", "-f", "json"]);
    let all: Vec<serde_json::Value> = serde_json::from_str(&all).expect("json");
    // 1050 users, stu's token, ted, stu and init's admin.
    assert_eq!(all.len(), 1054);
    let ids: Vec<i64> = all.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first, no repeats"
    );
    let some = cli.ok(&["audit", "list", "--limit", "1020", "-f", "csv"]);
    assert_eq!(some.lines().count(), 1020);

    // A student may not read the log: lxc's error and exit 1.
    let url = &controller.url;
    cli.ok(&[
        "remote",
        "add",
        "stu",
        url,
        "--token",
        &token,
        "--accept-certificate",
    ]);
    cli.fails(&["audit", "list", "stu:"], "this needs the instructor role");
}
