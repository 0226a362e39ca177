//! The clap command tree: clap's own consistency checks, and lxc's argument shapes parse.

use clap::{CommandFactory, Parser};
use cohort_cli::args::{Cli, Verb};

#[test]
fn command_tree_passes_clap_debug_assert() {
    Cli::command().debug_assert();
}

fn parse(line: &[&str]) -> Cli {
    Cli::try_parse_from(std::iter::once("cohort").chain(line.iter().copied()))
        .unwrap_or_else(|e| panic!("{line:?}: {e}"))
}

#[test]
fn exec_takes_the_command_after_double_dash() {
    let Verb::Exec(exec) = parse(&["exec", "lab:c1", "--cwd", "/tmp", "--", "ls", "-la"]).verb
    else {
        panic!("not exec");
    };
    assert_eq!(exec.instance, "lab:c1");
    assert_eq!(exec.cwd.as_deref(), Some("/tmp"));
    assert_eq!(exec.command, ["ls", "-la"]);
}

#[test]
fn lxc_aliases_and_flags_parse() {
    assert!(matches!(
        parse(&["ls", "-c", "ns", "-f", "csv"]).verb,
        Verb::List(_)
    ));
    assert!(matches!(parse(&["rm", "-f", "c1"]).verb, Verb::Delete(d) if d.force));
    let Verb::Stop(stop) = parse(&["stop", "c1", "c2", "--timeout", "10", "-f"]).verb else {
        panic!("not stop");
    };
    assert_eq!(
        (stop.instances.len(), stop.timeout, stop.force),
        (2, 10, true)
    );
    assert!(matches!(
        parse(&["-q", "cluster", "evac", "n1", "--force"]).verb,
        Verb::Cluster(_)
    ));
    assert!(matches!(
        parse(&["remote", "set-default", "lab"]).verb,
        Verb::Remote(_)
    ));
}

#[test]
fn course_flags_are_designs() {
    let line = [
        "course",
        "create",
        "cs101",
        "--title",
        "Intro",
        "--image",
        "cohort/base",
        "--cpu",
        "2",
        "--memory",
        "4GiB",
        "--disk",
        "20GiB",
        "--gpus",
        "1",
        "--gpu-model",
        "A100",
        "--gpu-share",
        "exclusive",
        "--starts",
        "2026-09-01",
        "--ends",
        "2026-12-20",
    ];
    assert!(matches!(parse(&line).verb, Verb::Course(_)));
    parse(&["course", "provision", "cs101", "--wait", "--quiet"]);
    parse(&["course", "endpoints", "cs101", "--format", "ssh-config"]);
    parse(&[
        "course",
        "teardown",
        "cs101",
        "--delete",
        "--keep-homes",
        "--force",
    ]);
}

#[test]
fn bad_input_is_refused_by_clap() {
    let refused = |line: &[&str]| {
        Cli::try_parse_from(std::iter::once("cohort").chain(line.iter().copied())).is_err()
    };
    assert!(refused(&["exec", "c1"]), "exec needs a command");
    assert!(refused(&["list", "-f", "xml"]));
    assert!(refused(&["start"]), "start needs a name or --all");
    assert!(refused(&[
        "course",
        "endpoints",
        "cs101",
        "--format",
        "table"
    ]));
}
