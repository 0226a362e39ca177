//! The course verbs end to end: a course, a roster (one student with a key, one without),
//! provisioning with `--wait`, the endpoints export in its three formats, teardown and delete,
//! against a real controller and a real agent on one node.

use crate::cli_support;

use cli_support::OneNode;
use cohort_e2e::ssh::SshKey;

#[test]
fn course_create_roster_provision_endpoints_teardown() {
    let node = OneNode::start();
    let (lxd, cli) = (&node.lxd, &node.cli);
    cli.ok(&[
        "course",
        "create",
        "cs101",
        "--title",
        "Intro to GPUs",
        "--image",
        "cohort/base",
        "--cpu",
        "1",
        "--memory",
        "256MiB",
        "--disk",
        "2GiB",
    ]);
    let listed = cli.ok(&["course", "list", "-f", "csv"]);
    assert!(
        listed.starts_with("cs101,Intro to GPUs,labadmin,cohort/base,ACTIVE,0"),
        "{listed}"
    );
    assert!(cli
        .ok(&["course", "show", "cs101"])
        .contains("memory_mib: 256"));

    let key = SshKey::generate();
    let dir = tempfile::tempdir().unwrap();
    let roster = dir.path().join("roster.csv");
    let rows = format!(
        "username,name,email,ssh_key\nalice,Alice A,alice@example.edu,{}\nbob,Bob B,bob@example.edu,\n",
        key.public_key()
    );
    std::fs::write(&roster, rows).unwrap();
    let report = cli.ok(&["course", "roster", "cs101", roster.to_str().unwrap()]);
    assert!(
        report.contains("- alice") && report.contains("- bob"),
        "{report}"
    );
    assert!(report.contains("passwords_generated:\n- bob"), "{report}");

    cli.ok(&["course", "provision", "cs101", "--wait", "--quiet"]);
    let theirs = lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    let ours = cli.ok(&["list", "course=cs101", "-f", "csv", "-c", "ns"]);
    assert_eq!(ours, theirs);
    assert_eq!(ours.lines().count(), 2, "{ours}");
    assert!(ours.lines().all(|l| l.ends_with(",RUNNING")), "{ours}");

    let csv = cli.ok(&["course", "endpoints", "cs101"]);
    assert!(
        csv.starts_with("username,instance,node,host,port,ssh_command"),
        "{csv}"
    );
    let alice = csv
        .lines()
        .find(|l| l.starts_with("alice,"))
        .expect("alice's row");
    // Bob came without a key: his generated password is in this first export, and no other.
    let bob_password = |csv: &str| {
        csv.lines()
            .find(|l| l.starts_with("bob,"))
            .and_then(|l| l.split(',').nth(6))
            .expect("bob's password cell")
            .to_string()
    };
    assert_eq!(bob_password(&csv).len(), 16, "{csv}");
    let later = cli.ok(&["course", "endpoints", "cs101"]);
    assert_eq!(bob_password(&later), "", "{later}");
    // The instructor issues him a new one, printed once; alice has a key: refused.
    let issued = cli.ok(&["course", "student", "password", "cs101", "bob"]);
    assert_eq!(issued.trim().len(), 16, "{issued}");
    assert_ne!(issued.trim(), bob_password(&csv));
    cli.fails(&["course", "student", "password", "cs101", "alice"], "own");
    assert!(
        alice.contains(",node1,127.0.0.1,") && alice.contains("ssh -p "),
        "{alice}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&cli.ok(&["course", "endpoints", "cs101", "--format", "json"]))
            .expect("endpoints json");
    assert_eq!(json.as_array().map(Vec::len), Some(2));
    let ssh_config = cli.ok(&["course", "endpoints", "cs101", "--format", "ssh-config"]);
    assert!(
        ssh_config.contains("Host ") && ssh_config.contains("Port "),
        "{ssh_config}"
    );

    cli.ok(&["-q", "course", "teardown", "cs101", "--force"]);
    let stopped = lxd.lxc(&["list", "-f", "csv", "-c", "s"]);
    assert_eq!(stopped, "STOPPED\nSTOPPED\n");
    // Stopped is not torn down: the course cannot go yet.
    cli.fails(
        &["course", "delete", "cs101", "--force"],
        "tear it down with --delete first",
    );
    cli.ok(&["-q", "course", "teardown", "cs101", "--delete", "--force"]);
    assert_eq!(lxd.lxc(&["list", "-f", "csv", "-c", "n"]), "");
    cli.ok(&["course", "delete", "cs101", "--force"]);
    assert_eq!(cli.ok(&["course", "list", "-f", "csv"]), "");
}

/// `cohort course student snapshot|snapshots|restore`: an instructor snapshots one student's
/// container, the student's system files change, and a restore brings them back. The home
/// volume is the student's own work and is not part of a container snapshot (it also survives
/// resets), so a file there keeps its latest content.
#[test]
fn instructor_snapshots_and_restores_one_students_container() {
    let node = OneNode::start();
    let cli = &node.cli;
    cli.ok(&[
        "course",
        "create",
        "cs201",
        "--title",
        "Snapshots",
        "--image",
        "cohort/base",
        "--memory",
        "256MiB",
        "--disk",
        "2GiB",
    ]);
    let key = SshKey::generate();
    let dir = tempfile::tempdir().unwrap();
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        format!(
            "username,name,email,ssh_key\nalice,Alice,,{}\n",
            key.public_key()
        ),
    )
    .unwrap();
    cli.ok(&["course", "roster", "cs201", roster.to_str().unwrap()]);
    cli.ok(&["course", "provision", "cs201", "--wait", "--quiet"]);
    let write = |text: &str| {
        let script = format!("echo {text} > /srv/lab.txt && echo {text} > /home/alice/work.txt");
        cli.ok(&["exec", "cs201-alice", "--", "sh", "-c", &script]);
    };
    let read = |path: &str| cli.ok(&["exec", "cs201-alice", "--", "cat", path]);

    write("first");
    cli.ok(&["course", "student", "snapshot", "cs201", "alice", "before"]);
    let auto = cli.ok(&["course", "student", "snapshot", "cs201", "alice"]);
    let auto = auto.trim();
    assert!(
        auto.starts_with("snap-20") && auto.len() == "snap-20261122-101530".len(),
        "default name {auto:?}"
    );
    write("second");
    let listed = cli.ok(&[
        "course",
        "student",
        "snapshots",
        "cs201",
        "alice",
        "-f",
        "csv",
    ]);
    let names: Vec<&str> = listed
        .lines()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{listed}");
    assert!(
        names.contains(&"before") && names.contains(&auto),
        "{listed}"
    );
    // LXD's own view agrees.
    let theirs = node.lxd.lxc(&["info", "cs201-alice"]);
    assert!(
        theirs.contains("before") && theirs.contains(auto),
        "{theirs}"
    );

    cli.ok(&["course", "student", "restore", "cs201", "alice", "before"]);
    assert_eq!(read("/srv/lab.txt"), "first\n");
    assert_eq!(read("/home/alice/work.txt"), "second\n");
    let running = node.lxd.lxc(&["list", "-f", "csv", "-c", "ns"]);
    assert_eq!(running, "cs201-alice,RUNNING\n");

    cli.fails(
        &["course", "student", "restore", "cs201", "alice", "Bad_Name"],
        "snapshot",
    );
    cli.fails(
        &[
            "course", "student", "snapshot", "cs201", "alice", "Bad_Snap",
        ],
        "name",
    );
    cli.fails(
        &["course", "student", "snapshot", "cs201", "nobody"],
        "student nobody",
    );
    cli.fails(
        &[
            "course",
            "student",
            "restore",
            "cs201",
            "alice",
            "never-taken",
        ],
        "never-taken",
    );
}

/// Issue 25: a size without a unit was read as bytes (`--memory 4` made a course of 1 MiB that
/// every provision then failed on), and sizes the node refuses were accepted. Both are an
/// `Error:` line now, and no course is made.
#[test]
fn course_sizes_need_a_unit_and_enough_memory() {
    let controller = cli_support::Controller::start();
    let cli = cli_support::Cli::admin_of(&controller);
    let create = |memory: &str, disk: &str| {
        vec![
            "course",
            "create",
            "cs102",
            "--title",
            "Sizes",
            "--image",
            "cohort/base",
            "--memory",
            memory,
            "--disk",
            disk,
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let run = |args: Vec<String>, message: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli.fails(&args, message);
    };
    run(
        create("4", "2GiB"),
        "Invalid size \"4\": give a unit, e.g. 4GiB or 4MiB",
    );
    run(create("512MiB", "2"), "Invalid size \"2\": give a unit");
    run(
        create("32MiB", "2GiB"),
        "32 MiB is too little: an instance needs at least 64 MiB (field: memory_mib)",
    );
    assert_eq!(
        cli.ok(&["course", "list", "-f", "csv"]),
        "",
        "a course was made"
    );
}

/// Issue 24: `--home-size` on `course create` and `course set` takes the CLI's sizes (a unit is
/// required), the controller keeps it in range, and `course show` says what was set;
/// `--home-size default` goes back to the controller's default.
#[test]
fn a_course_sets_the_size_of_its_homes() {
    let controller = cli_support::Controller::start();
    let cli = cli_support::Cli::admin_of(&controller);
    let tarball = cli_support::base_image_tarball();
    let tarball = tarball.to_str().unwrap();
    cli.ok(&["-q", "image", "import", tarball, "--alias", "cohort/base"]);
    let create = ["course", "create", "cs104", "--title", "Homes"];
    let image = ["--image", "cohort/base", "--disk", "2GiB"];
    let with = |size: &'static str| [&create[..], &image[..], &["--home-size", size]].concat();
    cli.fails(&with("64"), "Invalid size \"64\": give a unit");
    cli.fails(
        &with("16MiB"),
        "must be 32 to 16777216 MiB (field: home_mib)",
    );
    assert_eq!(
        cli.ok(&["course", "list", "-f", "csv"]),
        "",
        "a course was made"
    );
    cli.ok(&with("512MiB"));
    let shown = cli.ok(&["course", "show", "cs104"]);
    assert!(shown.contains("home_mib: 512\n"), "{shown}");

    cli.ok(&["course", "set", "cs104", "--home-size", "2GiB"]);
    let shown = cli.ok(&["course", "show", "cs104"]);
    assert!(shown.contains("home_mib: 2048\n"), "{shown}");
    cli.fails(
        &["course", "set", "cs104", "--home-size", "20TiB"],
        "(field: home_mib)",
    );
    cli.ok(&["course", "set", "cs104", "--home-size", "default"]);
    let shown = cli.ok(&["course", "show", "cs104"]);
    assert!(!shown.contains("home_mib"), "{shown}");
    let audit = cli.ok(&["audit", "list", "-f", "csv"]);
    assert!(
        audit
            .lines()
            .any(|l| l.contains("set_home") && l.contains("cs104")),
        "{audit}"
    );
}

/// Issue 24: a provision only part of which fits. `course provision --wait` returns once every
/// student's container runs or waits in the queue, with exit status 2 (0 when all run) and each
/// queued student's reason; `cohort info` of the queued one says which resource is short.
#[test]
fn provision_wait_returns_with_queued_students_and_says_why() {
    let node = OneNode::start();
    let cli = &node.cli;
    // Each student asks for 60% of the node's memory (as its first poll recorded it): one fits,
    // the other waits.
    let started = std::time::Instant::now();
    let nodes: serde_json::Value = loop {
        let nodes: serde_json::Value =
            serde_json::from_str(&cli.ok(&["cluster", "list", "-f", "json"])).expect("nodes");
        if nodes[0]["memory_bytes"].as_u64().unwrap_or(0) > 0 {
            break nodes;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "node1 never polled: {nodes}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let memory_mib = nodes[0]["memory_bytes"].as_u64().expect("memory") / (1 << 20);
    let ask = memory_mib * 6 / 10;
    cli.ok(&[
        "course",
        "create",
        "cs301",
        "--title",
        "Too big for two",
        "--image",
        "cohort/base",
        "--memory",
        &format!("{ask}MiB"),
        "--disk",
        "2GiB",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        "username,name,email,ssh_key\nann,Ann,,\nben,Ben,,\n",
    )
    .unwrap();
    cli.ok(&["course", "roster", "cs301", roster.to_str().unwrap()]);

    let started = std::time::Instant::now();
    let out = cli.run(&["course", "provision", "cs301", "--wait", "--quiet"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(600),
        "--wait returned only after {:?}",
        started.elapsed()
    );
    let why = format!("needs {ask} MiB of memory; most free on any node: ");
    assert!(
        stderr.starts_with("1 of 2 containers are queued:") && stderr.contains(&why),
        "{stderr}"
    );
    let listed = cli.ok(&["list", "course=cs301", "-f", "csv", "-c", "ns"]);
    let queued = listed
        .lines()
        .find_map(|l| l.strip_suffix(",QUEUED"))
        .unwrap_or_else(|| panic!("one queued: {listed}"));
    assert!(listed.contains(",RUNNING"), "the other runs: {listed}");
    let info = cli.ok(&["info", queued]);
    assert!(
        info.lines()
            .any(|l| l.starts_with("Queued: ") && l.contains(&why)),
        "{info}"
    );
    cli.ok(&["-q", "course", "teardown", "cs301", "--delete", "--force"]);
}
