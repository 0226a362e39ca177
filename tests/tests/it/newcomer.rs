//! Issue 46's newcomer's machine: `cohort-agent doctor`'s table fits an 80-column terminal and
//! finds lxcfs, which `scripts/setup` starts before the daemons.

/// `cohort-agent doctor` against the shared daemon, its output piped (as into a log or a paste).
fn doctor() -> String {
    let out = std::process::Command::new(cohort_e2e::cluster::agent_binary())
        .arg("doctor")
        .env_remove("COLUMNS")
        .env("COHORT_AGENT_NODE_NAME", "doctor")
        .env("COHORT_AGENT_LXD_SOCKET", cohort_e2e::lxd::socket_path())
        .output()
        .expect("run cohort-agent doctor");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn doctor_fits_80_columns_and_finds_lxcfs() {
    let table = doctor();
    let rows = table.lines().filter(|l| l.starts_with('│')).count();
    assert!(rows > 10, "{table}");
    for line in table.lines() {
        assert!(
            line.chars().count() <= 80,
            "{} columns: {line}\n{table}",
            line.chars().count()
        );
    }
    let lxcfs = cohort_e2e::agent::doctor_row(&table, "lxcfs").expect("an lxcfs row");
    assert!(
        lxcfs.contains("OK") && lxcfs.contains("/var/lib/lxcfs"),
        "{lxcfs}\n{table}"
    );
    // The other rows read whole again, wrapped or not.
    let reachable = cohort_e2e::agent::doctor_row(&table, "LXD reachable").expect("LXD row");
    assert!(reachable.contains("OK"), "{reachable}");
}

/// `cohort image list` says which images are Jupyter images; a course title of zero-width and
/// BOM characters only is refused as a blank one is, naming the title.
#[test]
fn image_list_marks_jupyter_images_and_invisible_titles_are_refused() {
    use crate::cli_support::{base_image_tarball, Cli, Controller};
    let controller = Controller::start();
    let cli = Cli::admin_of(&controller);
    let tarball = base_image_tarball();
    let tarball = tarball.to_str().expect("a path");
    cli.ok(&[
        "-q",
        "image",
        "import",
        tarball,
        "--alias",
        "lab/notebook",
        "--jupyter",
    ]);
    let listed = cli.ok(&["image", "list", "-f", "csv"]);
    let row: Vec<&str> = listed
        .lines()
        .find(|l| l.starts_with("lab/notebook,"))
        .unwrap_or_else(|| panic!("not listed: {listed}"))
        .split(',')
        .collect();
    // ALIAS, FINGERPRINT, GPU READY, JUPYTER, ...
    assert_eq!((row[2], row[3]), ("no", "yes"), "{listed}");
    let json: serde_json::Value =
        serde_json::from_str(&cli.ok(&["image", "list", "-f", "json"])).expect("json");
    assert_eq!(json[0]["jupyter"], true, "{json}");

    for title in ["\u{200B}\u{FEFF}", "\u{FEFF}", " \u{200D} "] {
        cli.fails(
            &[
                "course",
                "create",
                "zw1",
                "--title",
                title,
                "--image",
                "lab/notebook",
            ],
            "title",
        );
    }
    assert!(!cli.ok(&["course", "list", "-f", "csv"]).contains("zw1"));
}
