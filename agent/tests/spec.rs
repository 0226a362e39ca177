//! A create request turned into LXD's body: the keys and devices the agent sets, GPUs pinned by
//! PCI address or MIG uuid, and what is refused before anything reaches LXD.

use cohort_agent::instances::spec::{plan, spec_hash};
use cohort_agent::instances::InstanceError;
use cohort_proto::agent::{CreateInstance, GpuAttachment, InstanceSource, Limits, SshAccess};

const KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN4j9xJ2DuFqdAabTQjWmehKMbbXNP/68/vrLUocne8v alice@lab";

fn request() -> CreateInstance {
    CreateInstance {
        idempotency_key: "op-1".into(),
        name: "cs101-alice".into(),
        source: InstanceSource::Image {
            alias: "cohort/base".into(),
        },
        limits: Limits {
            cpu: 2,
            memory_mib: 4096,
            disk_gib: 20,
        },
        gpus: vec![
            GpuAttachment {
                uuid: "GPU-1".into(),
                pci_address: Some("0000:3b:00.0".into()),
                mig_uuid: None,
                memory_cap_bytes: None,
            },
            GpuAttachment {
                uuid: "GPU-2".into(),
                pci_address: Some("0000:af:00.0".into()),
                mig_uuid: Some("MIG-4a3b1c2d-0000-4000-8000-000000000001".into()),
                memory_cap_bytes: None,
            },
        ],
        ssh: Some(SshAccess {
            username: "alice".into(),
            authorized_keys: vec![format!("  {KEY}\n")],
            password_hash: None,
            sudo: false,
            listen_address: "10.0.0.5".into(),
            port: 20001,
        }),
        home_volume: Some("home-alice".into()),
        home_mib: None,
        home_snapshots: None,
        config: [("user.course".to_string(), "cs101".to_string())].into(),
        start: true,
        network_policy: None,
    }
}

fn field_of(e: InstanceError) -> String {
    match e {
        InstanceError::Invalid { field, .. } => field,
        other => panic!("expected a 400, got {other}"),
    }
}

#[test]
fn body_sets_limits_security_gpus_ssh_and_home() {
    let p = plan(&request(), "cohort").unwrap();
    // As LXD receives it.
    let b = &serde_json::to_value(&p.body).unwrap();
    assert_eq!(b["profiles"], serde_json::json!([]));
    let c = &b["config"];
    assert_eq!(c["limits.cpu"], "2");
    assert_eq!(c["limits.memory"], "4096MiB");
    assert_eq!(c["boot.autostart"], "true");
    assert_eq!(c["security.idmap.isolated"], "true");
    assert_eq!(c["nvidia.runtime"], "true");
    assert_eq!(c["nvidia.driver.capabilities"], "compute,utility");
    assert_eq!(c["user.cohort.idempotency_key"], "op-1");
    assert_eq!(c["user.cohort.spec"], p.spec_hash.as_str());
    assert_eq!(c["user.course"], "cs101");
    let d = &b["devices"];
    assert_eq!(d["root"]["size"], "20GiB");
    assert_eq!(d["root"]["pool"], "cohort");
    assert_eq!(d["cohort-ssh"]["listen"], "tcp:10.0.0.5:20001");
    assert_eq!(d["cohort-ssh"]["connect"], "tcp:127.0.0.1:22");
    assert_eq!(d["cohort-home"]["source"], "home-alice");
    assert_eq!(d["cohort-home"]["path"], "/home/alice");
    assert_eq!(d["cohort-gpu0"]["gputype"], "physical");
    assert_eq!(d["cohort-gpu0"]["pci"], "0000:3b:00.0");
    assert_eq!(d["cohort-gpu1"]["gputype"], "mig");
    assert_eq!(
        d["cohort-gpu1"]["mig.uuid"],
        "MIG-4a3b1c2d-0000-4000-8000-000000000001"
    );
    assert_eq!(
        p.ssh.unwrap().authorized_keys,
        vec![KEY.to_string()],
        "key normalised"
    );
    // Made stopped, it stays stopped when LXD or the node restarts.
    let mut stopped = request();
    stopped.start = false;
    let p = plan(&stopped, "cohort").unwrap();
    assert_eq!(p.body.config["boot.autostart"], "false");
}

#[test]
fn spec_hash_ignores_the_key_and_sees_every_other_change() {
    let a = request();
    let mut same = a.clone();
    same.idempotency_key = "op-2".into();
    assert_eq!(spec_hash(&a), spec_hash(&same));
    let mut other = a.clone();
    other.limits.cpu = 3;
    assert_ne!(spec_hash(&a), spec_hash(&other));
}

#[test]
fn dangerous_and_unknown_input_is_refused_naming_the_field() {
    for key in [
        "security.privileged",
        "security.nesting",
        "raw.idmap",
        "raw.lxc",
        "nvidia.runtime",
        "user.cohort.spec",
        "linux.kernel_modules",
    ] {
        let mut r = request();
        r.config.insert(key.into(), "x".into());
        assert_eq!(
            field_of(plan(&r, "cohort").err().unwrap()),
            format!("config.{key}")
        );
    }
    let mut r = request();
    r.ssh
        .as_mut()
        .unwrap()
        .authorized_keys
        .push("ssh-dss AAAAB3NzaC1kc3M= old".into());
    assert_eq!(
        field_of(plan(&r, "cohort").err().unwrap()),
        "ssh.authorized_keys[1]"
    );
    let mut r = request();
    r.ssh.as_mut().unwrap().username = "root".into();
    assert_eq!(field_of(plan(&r, "cohort").err().unwrap()), "ssh.username");
    let mut r = request();
    r.gpus[0].pci_address = Some("3B:00.0".into());
    assert_eq!(
        field_of(plan(&r, "cohort").err().unwrap()),
        "gpus[0].pci_address"
    );
    let mut r = request();
    r.limits.memory_mib = 0;
    assert_eq!(
        field_of(plan(&r, "cohort").err().unwrap()),
        "limits.memory_mib"
    );
    let mut r = request();
    r.ssh = None;
    assert_eq!(field_of(plan(&r, "cohort").err().unwrap()), "home_volume");
}

/// A home's size is checked, needs a home volume, and is not part of the spec: the home outlives
/// its container and takes its course's size anew when the container is made again.
#[test]
fn a_home_size_is_checked_and_left_out_of_the_spec() {
    let mut sized = request();
    sized.home_mib = Some(64);
    assert!(plan(&sized, "cohort").is_ok());
    assert_eq!(spec_hash(&sized), spec_hash(&request()));
    for mib in [16, (16 << 20) + 1] {
        sized.home_mib = Some(mib);
        assert_eq!(field_of(plan(&sized, "cohort").err().unwrap()), "home_mib");
    }
    let mut no_volume = request();
    no_volume.home_volume = None;
    no_volume.home_mib = Some(64);
    assert_eq!(
        field_of(plan(&no_volume, "cohort").err().unwrap()),
        "home_mib"
    );
}
