//! Issue 46, the real clients: Incus's `incus remote add` (6.0, the client Debian moves admins
//! to) and pylxd's `Client.authenticate(token)` join Cohort's LXD-style API with a token from
//! `cohort config trust add`, as the 5.0 `lxc` client does (tests in lxc_trust.rs).

use crate::cli_support;

use std::process::{Command, Stdio};

use cli_support::{token_of, Cli, Controller, ADMIN};

/// `incus ARGS` with a configuration directory of its own (`INCUS_CONF`): stdout, or a panic
/// with what it said.
fn incus(conf: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("incus")
        .args(args)
        .env("INCUS_CONF", conf)
        .stdin(Stdio::null())
        .output()
        .expect("run incus");
    assert!(
        out.status.success(),
        "incus {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn incus_remote_add_joins_with_a_token() {
    let controller = Controller::start_with_lxd_api();
    let cli = Cli::admin_of(&controller);
    let conf = tempfile::tempdir().unwrap();
    let token = token_of(&cli.ok(&["config", "trust", "add", "incus-laptop"]));
    incus(conf.path(), &["remote", "add", "lab", &token]);
    let server: serde_json::Value =
        serde_json::from_str(&incus(conf.path(), &["query", "lab:/1.0"])).unwrap();
    assert_eq!(server["auth"], "trusted", "{server}");
    assert_eq!(server["auth_user_name"], ADMIN);
    assert_eq!(incus(conf.path(), &["list", "lab:", "-f", "csv"]), "");
    // The token is spent: a second Incus client is refused with it.
    let other = tempfile::tempdir().unwrap();
    let out = Command::new("incus")
        .args(["remote", "add", "lab", &token])
        .env("INCUS_CONF", other.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("trust token"), "{stderr}");
}

#[test]
fn pylxd_authenticate_trusts_its_certificate() {
    let controller = Controller::start_with_lxd_api();
    let address = controller.lxd_address.clone().unwrap();
    let cli = Cli::admin_of(&controller);
    cli.ok(&["user", "create", "sam", "--role", "student"]);
    let token = token_of(&cli.ok(&["config", "trust", "add", "notebook", "--user", "sam"]));
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = (dir.path().join("client.crt"), dir.path().join("client.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-384",
        ])
        .args(["-nodes", "-days", "30", "-subj", "/CN=pylxd", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("run openssl");
    assert!(made.status.success(), "{made:?}");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pylxd/authenticate.py");
    let out = Command::new(cohort_e2e::lxd::pylxd_python())
        .arg(&script)
        .arg(format!("https://{address}"))
        .arg(&crt)
        .arg(&key)
        .arg(controller.state.path().join("server.crt"))
        .arg(&token)
        .env("HOME", dir.path())
        .env_remove("REQUESTS_CA_BUNDLE")
        .env_remove("CURL_CA_BUNDLE")
        .output()
        .expect("run pylxd");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: serde_json::Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("{stdout}"));
    assert_eq!(seen["before"], false, "{seen}");
    assert!(seen.get("error").is_none(), "{seen}");
    assert_eq!(seen["after"], true, "{seen}");
    assert_eq!(seen["user"], "sam", "{seen}");
    assert_eq!(
        seen["certificates"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
}

/// A small unified LXD image (`metadata.yaml` and `rootfs/`), compressed by `tar FLAG`
/// (`-z`, `-J`); `marker` makes each one's fingerprint its own.
fn tiny_image(dir: &std::path::Path, flag: &str, marker: &str) -> std::path::PathBuf {
    let tree = dir.join(format!("tree-{marker}"));
    std::fs::create_dir_all(tree.join("rootfs/etc")).unwrap();
    std::fs::write(
        tree.join("metadata.yaml"),
        format!("architecture: x86_64\ncreation_date: 1\nproperties:\n  description: {marker}\n"),
    )
    .unwrap();
    std::fs::write(tree.join("rootfs/etc/marker"), marker).unwrap();
    let out = dir.join(format!("{marker}.tar"));
    let made = Command::new("tar")
        .arg(flag)
        .arg("-cf")
        .arg(&out)
        .arg("-C")
        .arg(&tree)
        .args(["metadata.yaml", "rootfs"])
        .output()
        .expect("run tar");
    assert!(made.status.success(), "{made:?}");
    out
}

fn sha256_of(path: &std::path::Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).unwrap()))
}

#[test]
fn admins_import_export_and_delete_images_with_lxc() {
    let controller = Controller::start_with_lxd_api();
    let cli = Cli::admin_of(&controller);
    cli.ok(&["user", "create", "sam", "--role", "student"]);
    let admin = cli_support::Lxc::trusted_by(&cli, "laptop", None);
    let dir = tempfile::tempdir().unwrap();
    let image = tiny_image(dir.path(), "-z", "lxc-import");
    let fingerprint = sha256_of(&image);

    admin.ok(&[
        "image",
        "import",
        image.to_str().unwrap(),
        "lab:",
        "--alias",
        "tiny",
    ]);
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("tiny,") && l.contains(&fingerprint[..12])),
        "{listed}"
    );
    let shown = admin.ok(&["image", "list", "lab:", "-f", "csv", "-c", "lf"]);
    assert!(
        shown.contains(&format!("tiny,{}", &fingerprint[..12])),
        "{shown}"
    );

    // `lxc image export` gives back the very bytes uploaded.
    let exported = dir.path().join("exported");
    admin.ok(&["image", "export", "lab:tiny", exported.to_str().unwrap()]);
    let file = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("exported"))
        .expect("an exported file");
    assert_eq!(sha256_of(&file), fingerprint);

    // A student cannot upload, and an xz image is catalogued too (pylxd's are).
    let sam = cli_support::Lxc::trusted_by(&cli, "sams-laptop", Some("sam"));
    let xz = tiny_image(dir.path(), "-J", "xz-image");
    sam.fails(&["image", "import", xz.to_str().unwrap(), "lab:"], "admin");
    admin.ok(&["image", "import", xz.to_str().unwrap(), "lab:"]);
    let unnamed = admin.ok(&["image", "list", "lab:", "-f", "csv", "-c", "lf"]);
    assert!(
        unnamed.contains(&format!(",{}", &sha256_of(&xz)[..12])),
        "{unnamed}"
    );

    admin.ok(&["image", "delete", "lab:tiny"]);
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    assert!(!listed.contains("tiny,"), "{listed}");
    // Anything Cohort does not serve is said so, never "Not Found not found".
    let (refused, status) = admin.curl(
        controller.lxd_address.as_deref().unwrap(),
        "/1.0/storage-pools/x/volumes",
    );
    assert_eq!(status, 501, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap_or_default()
            .contains("Not supported by Cohort"),
        "{refused}"
    );
}
