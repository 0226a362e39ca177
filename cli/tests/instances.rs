//! How an instance from the API is shown: list columns and filters, lxc-shaped JSON, `info`,
//! `config show`, and the create request built from `launch` flags.

use std::collections::BTreeMap;

use clap::Parser;
use cohort_cli::args::{Cli, Verb};
use cohort_cli::columns::{self, Column};
use cohort_cli::commands::{config, info, launch, list, snapshot};
use cohort_cli::render::{self, Rows};
use cohort_proto::api::instances::{
    DesiredState, Instance, InstanceGpu, Limits, ObservedState, Snapshot,
};

fn instance(name: &str, state: ObservedState) -> Instance {
    Instance {
        name: name.into(),
        owner: "alice".into(),
        course: Some("cs101".into()),
        node: Some("gpu1".into()),
        image: "cohort/base".into(),
        desired_state: DesiredState::Running,
        observed_state: state,
        limits: Limits {
            cpu: 2,
            memory_mib: 4096,
            disk_gib: 20,
        },
        gpus: vec![
            InstanceGpu {
                uuid: "GPU-1".into(),
                model: "A100".into(),
                slot: 0,
            },
            InstanceGpu {
                uuid: "GPU-2".into(),
                model: "A100".into(),
                slot: 0,
            },
        ],
        ssh_host: Some("gpu1.lab".into()),
        ssh_port: Some(22001),
        ssh_host_key: Some(
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeyOfTheHost root@cs101-alice".into(),
        ),
        priority: 0,
        config: BTreeMap::from([("user.course".into(), "cs101".into())]),
        error: None,
        created_at: "2026-11-22T13:18:00Z".parse().unwrap(),
        last_seen_at: None,
        gpu_usage: Vec::new(),
        gpu_active_at: None,
        stop_reason: None,
        stopped_at: None,
        gpu_detach_reason: None,
        gpus_detached_at: None,
        description: None,
    }
}

#[test]
fn column_letters_parse_like_lxc() {
    assert_eq!(Column::parse_list("n,s,L").unwrap().len(), 3);
    assert_eq!(Column::parse_list(columns::DEFAULT).unwrap().len(), 8);
    assert_eq!(Column::parse_list(columns::FAST).unwrap().len(), 5);
    let err = Column::parse_list("nsS").unwrap_err().to_string();
    assert!(
        err.contains("'S' (Number of snapshots) is not available"),
        "{err}"
    );
    assert!(Column::parse_list("n,,s").is_err());
    assert!(Column::parse_list("n,user.comment:C").is_err());
}

#[test]
fn cells_for_the_default_columns() {
    let columns = Column::parse_list(columns::DEFAULT).unwrap();
    let i = instance("cs101-alice", ObservedState::Running);
    let cells: Vec<String> = columns.iter().map(|c| c.cell(&i)).collect();
    assert_eq!(
        cells,
        [
            "cs101-alice",
            "RUNNING",
            "gpu1",
            "CONTAINER",
            "alice",
            "cs101",
            "2x A100",
            "gpu1.lab:22001"
        ]
    );
    let headers: Vec<&str> = columns.iter().map(|c| c.header()).collect();
    assert_eq!(
        headers,
        ["NAME", "STATE", "LOCATION", "TYPE", "OWNER", "COURSE", "GPUS", "SSH"]
    );
}

#[test]
fn csv_ns_rows_match_lxc_shape() {
    let columns = Column::parse_list("ns").unwrap();
    let mut rows = Rows::new(columns.iter().map(|c| c.header()));
    for i in [
        instance("c1", ObservedState::Stopped),
        instance("c2", ObservedState::Running),
    ] {
        rows.push(columns.iter().map(|c| c.cell(&i)));
    }
    assert_eq!(render::csv(&rows), "c1,STOPPED\nc2,RUNNING\n");
}

#[test]
fn filters() {
    let i = instance("cs101-alice", ObservedState::Running);
    assert!(list::matches(&i, "cs101"));
    assert!(!list::matches(&i, "alice"));
    assert!(list::matches(&i, "status=running"));
    assert!(list::matches(&i, "status=RUNNING"));
    assert!(!list::matches(&i, "status=stopped"));
    assert!(list::matches(&i, "location=gpu1"));
    assert!(list::matches(&i, "owner=alice"));
    assert!(list::matches(&i, "course=cs101"));
    assert!(list::matches(&i, "user.course=cs101"));
}

#[test]
fn list_arguments_name_a_remote_like_lxc() {
    let split = |args: &[&str]| {
        let owned: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let (remote, filters) = list::split_remote(&owned);
        (remote.map(str::to_string), filters.join(" "))
    };
    assert_eq!(split(&["lab:"]), (Some("lab".into()), "".into()));
    assert_eq!(
        split(&["lab:web", "owner=bob"]),
        (Some("lab".into()), "web owner=bob".into())
    );
    assert_eq!(split(&["web"]), (None, "web".into()));
    assert_eq!(
        split(&["user.mac=00:16:3e"]),
        (None, "user.mac=00:16:3e".into())
    );
}

#[test]
fn json_carries_lxcs_field_names() {
    let value = list::lxc_shaped(&instance("c1", ObservedState::Stopped));
    assert_eq!(value["name"], "c1");
    assert_eq!(value["status"], "Stopped");
    assert_eq!(value["location"], "gpu1");
    assert_eq!(value["type"], "container");
    assert_eq!(value["config"]["user.course"], "cs101");
    assert!(value["created_at"].is_string());
}

#[test]
fn info_reads_like_lxc() {
    let snaps = [Snapshot {
        name: "snap0".into(),
        created_at: Some("2026-11-22T14:00:00Z".parse().unwrap()),
        stateful: false,
    }];
    let text = info::describe(&instance("c1", ObservedState::Running), &snaps);
    assert!(
        text.starts_with(
            "Name: c1\nStatus: RUNNING\nType: container\nLocation: gpu1\n\
             Created: 2026/11/22 13:18 UTC\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("SSH: ssh -p 22001 alice@gpu1.lab\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "Known Host: [gpu1.lab]:22001 ssh-ed25519 \
             AAAAC3NzaC1lZDI1NTE5AAAAIKeyOfTheHost root@cs101-alice\n"
        ),
        "{text}"
    );
    assert!(text.contains("| snap0 | 2026/11/22 14:00 UTC |"), "{text}");
    assert_eq!(snapshot::next_name(&snaps), "snap1");
}

#[test]
fn config_show_has_lxcs_keys() {
    let shown = config::shown(&instance("c1", ObservedState::Running));
    let yaml = render::yaml(&shown).unwrap();
    assert!(yaml.starts_with("config:\n"), "{yaml}");
    assert!(yaml.contains("  limits.cpu: '2'\n"), "{yaml}");
    assert!(yaml.contains("  limits.memory: 4096MiB\n"), "{yaml}");
    assert!(yaml.contains("ephemeral: false\n"), "{yaml}");
}

#[test]
fn launch_flags_become_the_create_request() {
    let cli = Cli::try_parse_from([
        "cohort",
        "launch",
        "cohort/base",
        "c1",
        "-c",
        "limits.cpu=4",
        "-c",
        "limits.memory=8GiB",
        "-c",
        "user.note=x",
        "-d",
        "root,size=30GiB",
        "--gpus",
        "1",
        "--target",
        "gpu2",
    ])
    .unwrap();
    let Verb::Launch(args) = cli.verb else {
        panic!("not launch")
    };
    let request =
        launch::create_request(args.create, "c1".into(), "cohort/base".into(), true).unwrap();
    let limits = request.limits.unwrap();
    assert_eq!(
        (limits.cpu, limits.memory_mib, limits.disk_gib),
        (4, 8192, 30)
    );
    assert_eq!(
        request.config,
        BTreeMap::from([("user.note".into(), "x".into())])
    );
    assert_eq!((request.gpus, request.node.as_deref()), (1, Some("gpu2")));
    assert!(request.start);

    let cli = Cli::try_parse_from(["cohort", "init", "img", "c1", "-d", "eth0,nictype=bridged"]);
    let Verb::Init(args) = cli.unwrap().verb else {
        panic!("not init")
    };
    let err = launch::create_request(args, "c1".into(), "img".into(), false).unwrap_err();
    assert!(err.to_string().contains("Only the root disk size"), "{err}");
}
