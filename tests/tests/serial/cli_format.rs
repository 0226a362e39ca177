//! `cohort`'s table formats against the real `lxc` client: two stopped containers in a test
//! project, listed by lxc as table, compact and csv; cohort's formatter, given the same rows,
//! must print the same text, borders, padding and header included.

use crate::cli_support;

use std::time::{Duration, Instant};

use cli_support::OneNode;
use cohort_cli::render::{self, Rows};
use cohort_e2e::observe::{build_fake_nvml, start_sleep_in};
use cohort_e2e::TestLxd;

fn lxc_rows(lxd: &TestLxd, columns: &str, header: &[&str]) -> Rows {
    let csv = lxd.lxc(&["list", "--format", "csv", "-c", columns]);
    let mut rows = Rows::new(header.iter().copied());
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(csv.as_bytes());
    for record in reader.records() {
        rows.push(record.expect("lxc's csv").iter().map(str::to_string));
    }
    rows
}

#[test]
fn table_compact_and_csv_match_real_lxc() {
    let _alone = crate::alone_blocking();
    let lxd = TestLxd::new();
    lxd.lxc_create(&["init", "cohort/base", "web1"]);
    lxd.lxc_create(&["init", "cohort/base", "db-2"]);

    for (columns, header) in [
        ("ns", vec!["NAME", "STATE"]),
        ("nst", vec!["NAME", "STATE", "TYPE"]),
        ("tn", vec!["TYPE", "NAME"]),
    ] {
        let rows = lxc_rows(&lxd, columns, &header);
        assert_eq!(rows.rows.len(), 2, "two containers listed by lxc");
        assert_eq!(
            render::table(&rows),
            lxd.lxc(&["list", "--format", "table", "-c", columns]),
            "table -c {columns}"
        );
        assert_eq!(
            render::compact(&rows),
            lxd.lxc(&["list", "--format", "compact", "-c", columns]),
            "compact -c {columns}"
        );
        assert_eq!(
            render::csv(&rows),
            lxd.lxc(&["list", "--format", "csv", "-c", columns]),
            "csv -c {columns}"
        );
    }
}

#[test]
fn empty_list_matches_real_lxc() {
    let _alone = crate::alone_blocking();
    let lxd = TestLxd::new();
    let rows = Rows::new(["NAME", "STATE"]);
    assert_eq!(
        render::table(&rows),
        lxd.lxc(&["list", "--format", "table", "-c", "ns"])
    );
    assert_eq!(
        lxd.lxc(&["list", "--format", "csv", "-c", "ns"]),
        render::csv(&rows)
    );
}

/// `list -c G` and `info` on real data: the reclaimer stops an idle course container (its reason
/// and time in `info`), while a busy one's GPU use (from the test NVML library, naming a real
/// `sleep` in it; no GPU exists here) shows in the `G` column and in `info`.
#[test]
fn gpu_use_column_and_stop_reason_from_the_reclaimer() {
    let _alone = crate::alone_blocking();
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nvml(dir.path());
    let procs = dir.path().join("processes");
    std::fs::write(&procs, "").unwrap();
    // The controller and agent processes inherit these; a reclaim "minute" is 15 s.
    std::env::set_var("FAKE_NVML_PROCESSES", &procs);
    std::env::set_var("COHORT_AGENT_NVML_LIBRARY", &lib);
    std::env::set_var("COHORT_RECLAIM_INTERVAL_S", "1");
    std::env::set_var("COHORT_RECLAIM_MINUTE_S", "15");
    let node = OneNode::start();
    let (lxd, cli) = (&node.lxd, &node.cli);
    let course = |code: &str, extra: &[&str]| {
        let mut args = vec!["course", "create", code, "--title", "GPUs", "--image"];
        args.extend(["cohort/base", "--memory", "256MiB", "--disk", "2GiB"]);
        args.extend(extra);
        cli.run(&args)
    };
    let bad = course(
        "bad1",
        &["--idle-gpu-minutes", "3", "--idle-action", "sleep"],
    );
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        stderr.starts_with("Error: ") && stderr.contains("(field: idle_action)"),
        "{stderr}"
    );
    assert_eq!(
        cli.ok(&["course", "list", "-f", "csv"]),
        "",
        "nothing half-made"
    );
    let detach = course(
        "det1",
        &["--idle-gpu-minutes", "3", "--idle-action", "detach"],
    );
    assert!(detach.status.success());
    assert!(cli
        .ok(&["course", "show", "det1"])
        .contains("idle_action: detach"));
    assert!(
        course("gpu1", &["--idle-gpu-minutes", "3", "--warn-minutes", "0"])
            .status
            .success()
    );
    assert!(cli
        .ok(&["course", "show", "gpu1"])
        .contains("idle_action: stop"));

    let roster = dir.path().join("roster.csv");
    std::fs::write(
        &roster,
        "username,name,email,ssh_key\nalice,A,a@x.edu,\nbob,B,b@x.edu,\n",
    )
    .unwrap();
    cli.ok(&["course", "roster", "gpu1", roster.to_str().unwrap()]);
    cli.ok(&["course", "provision", "gpu1", "--wait", "--quiet"]);
    let pid = start_sleep_in(lxd.project(), "gpu1-alice");
    std::fs::write(&procs, format!("1 {pid} 1073741824\n")).unwrap();

    let started = Instant::now();
    let (alice, listed) = loop {
        let json: serde_json::Value =
            serde_json::from_str(&cli.ok(&["list", "gpu1-alice", "-f", "json"])).unwrap();
        let listed = cli.ok(&["list", "gpu1-alice", "-c", "nG", "-f", "csv"]);
        if json[0]["gpu_usage"]
            .as_array()
            .is_some_and(|u| !u.is_empty())
        {
            break (json[0].clone(), listed);
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no GPU use seen: {json}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let usage = &alice["gpu_usage"][0];
    let cell = format!(
        "{}: 1 proc, 1.07GB ({:.0}%)",
        usage["gpu"].as_str().unwrap(),
        usage["memory_share"].as_f64().unwrap() * 100.0
    );
    // The process file stays as it is, so every later poll reports the same use.
    let record: Vec<String> = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(listed.as_bytes())
        .records()
        .map(|r| r.expect("csv").iter().map(str::to_string).collect())
        .next()
        .expect("one row");
    assert_eq!(record, ["gpu1-alice".to_string(), cell.clone()], "{listed}");
    let table = cli.ok(&["list", "gpu1-alice", "-c", "nG"]);
    assert!(
        table.contains("GPU USE") && table.contains(&cell),
        "{table}"
    );

    let started = Instant::now();
    while cli.ok(&["list", "gpu1-bob", "-c", "s", "-f", "csv"]) != "STOPPED\n" {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "bob never stopped"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let info = cli.ok(&["info", "gpu1-bob"]);
    assert!(info.contains("Status: STOPPED"), "{info}");
    let reason = info
        .lines()
        .find_map(|l| l.strip_prefix("Stop Reason: "))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(
        reason.starts_with("no GPU or notebook use since ")
            && reason.ends_with("idle_gpu_minutes is 3)")
    );
    assert!(info.contains("\nStopped At: "), "{info}");
    assert_eq!(
        cli.ok(&["list", "gpu1-bob", "-c", "nG", "-f", "csv"]),
        "gpu1-bob,\n"
    );
    let audit = cli.ok(&[
        "audit", "list", "--actor", "reclaim", "--object", "gpu1-bob", "-f", "csv",
    ]);
    assert!(
        audit.contains(",reclaim,stop,instance,gpu1-bob,"),
        "{audit}"
    );
    assert!(audit.contains(reason), "{audit}");

    let info = cli.ok(&["info", "gpu1-alice"]);
    assert!(
        info.contains("Status: RUNNING") && !info.contains("Stop Reason"),
        "{info}"
    );
    assert!(info.contains("\nGPU Last Used: "), "{info}");
    assert!(info.contains(&format!("\nGPU Use:\n  {cell}\n")), "{info}");
}
