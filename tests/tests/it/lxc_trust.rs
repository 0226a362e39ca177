//! The real `lxc` 5.0.2 client and Cohort's trust tokens: `cohort config trust add` prints a
//! token `lxc remote add` accepts once; the certificate then acts as the user it is bound to,
//! with that user's role; untrusted and removed certificates get LXD's untrusted answers only.

use crate::cli_support;

use cli_support::{token_of, Cli, Controller, Lxc, ADMIN};

#[test]
fn a_trust_token_admits_one_lxc_client_as_its_user() {
    let controller = Controller::start_with_lxd_api();
    let address = controller.lxd_address.clone().unwrap();
    let cli = Cli::admin_of(&controller);
    cli.ok(&["user", "create", "sam", "--role", "student"]);

    // The admin's own client: trusted as the admin.
    let token = token_of(&cli.ok(&["config", "trust", "add", "laptop"]));
    let admin = Lxc::new();
    admin.ok(&["remote", "add", "lab", &token]);
    let server: serde_json::Value =
        serde_json::from_str(&admin.ok(&["query", "lab:/1.0"])).unwrap();
    assert_eq!(server["auth"], "trusted");
    assert_eq!(server["auth_user_name"], ADMIN);
    assert_eq!(server["environment"]["server_clustered"], true);

    // A token admits one client: a second one with the same token is refused.
    let second = Lxc::new();
    second.fails(&["remote", "add", "lab", &token], "trust token");

    // That refused client is untrusted: GET /1.0 says so, everything else is a 403.
    let (untrusted, status) = second.curl(&address, "/1.0");
    assert_eq!(
        (status, untrusted["metadata"]["auth"].clone()),
        (200, "untrusted".into())
    );
    assert!(
        untrusted["metadata"].get("environment").is_none(),
        "{untrusted}"
    );
    let (refused, status) = second.curl(&address, "/1.0/instances");
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["type"], "error");
    assert_eq!(refused["error_code"], 403);
    // Issue 47, item 9: a body announced by an untrusted client is refused before it is read.
    // curl sends 4 bytes of the 200 MB it announces and waits for the answer (at most 20 s):
    // a server that read first would wait for the rest.
    let tiny = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tiny.path(), b"{}  ").unwrap();
    let body = format!("@{}", tiny.path().display());
    let (refused, status) = second.curl_with(
        &address,
        "/1.0/instances/anything/files?path=/tmp/x",
        &[
            "-X",
            "POST",
            "-H",
            "Content-Length: 209715200",
            "--data-binary",
            &body,
        ],
    );
    assert_eq!(status, 403, "{refused}");

    // A student's client acts as the student: the student's role applies (no cluster view),
    // while the admin's client sees the cluster.
    let sam = Lxc::trusted_by(&cli, "sams-laptop", Some("sam"));
    let server: serde_json::Value = serde_json::from_str(&sam.ok(&["query", "lab:/1.0"])).unwrap();
    assert_eq!(server["auth_user_name"], "sam");
    sam.fails(&["cluster", "list", "lab:"], "instructor role");
    admin.ok(&["cluster", "list", "lab:"]);
    assert_eq!(admin.ok(&["list", "lab:", "-f", "csv"]), "");
    let projects = admin.ok(&["project", "list", "lab:", "-f", "csv"]);
    assert!(projects.starts_with("default"), "{projects}");

    // Issue 47 (also): trust expires. Past its expiry sam's client is untrusted; it was a year.
    let listed = cli.ok(&["config", "trust", "list", "-f", "json"]);
    assert!(listed.contains("expires_at"), "{listed}");
    let expire = |when: &str| {
        use diesel::prelude::*;
        let mut conn = PgConnection::establish(controller.db_url()).unwrap();
        diesel::sql_query(format!(
            "UPDATE lxd_certificates SET expires_at = now() + interval '{when}' \
             WHERE name = 'sams-laptop'"
        ))
        .execute(&mut conn)
        .unwrap();
    };
    expire("-1 second");
    let server: serde_json::Value = serde_json::from_str(&sam.ok(&["query", "lab:/1.0"])).unwrap();
    assert_eq!(
        server["auth"], "untrusted",
        "an expired certificate is still trusted"
    );
    expire("1 day");
    let server: serde_json::Value = serde_json::from_str(&sam.ok(&["query", "lab:/1.0"])).unwrap();
    assert_eq!(server["auth"], "trusted");

    // Only admins bind certificates to other users.
    let sam_cli = cli_as(&controller, &cli, "sam");
    sam_cli.fails(
        &["config", "trust", "add", "other", "--user", ADMIN],
        "only admins",
    );

    // The list shows both certificates with their users; removing one untrusts it at once.
    let listed = cli.ok(&["config", "trust", "list", "-f", "csv"]);
    assert!(
        listed.lines().any(|l| l.starts_with("laptop,labadmin,")),
        "{listed}"
    );
    assert!(
        listed.lines().any(|l| l.starts_with("sams-laptop,sam,")),
        "{listed}"
    );
    cli.ok(&["config", "trust", "remove", "sams-laptop"]);
    let server: serde_json::Value = serde_json::from_str(&sam.ok(&["query", "lab:/1.0"])).unwrap();
    assert_eq!(server["auth"], "untrusted");
    sam.fails(&["list", "lab:"], "Forbidden");
    cli.fails(&["config", "trust", "remove", "sams-laptop"], "not found");
}

/// A `cohort` client logged in as `username` with a token the admin issued.
fn cli_as(controller: &Controller, admin: &Cli, username: &str) -> Cli {
    let token = admin.ok(&["user", "token", username]);
    let cli = Cli {
        conf: tempfile::tempdir().unwrap(),
    };
    cli.ok(&[
        "remote",
        "add",
        "lab",
        &controller.url,
        "--token",
        token.trim(),
        "--accept-certificate",
    ]);
    cli
}
