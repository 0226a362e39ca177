//! The URLs and bodies the client sends, checked without a daemon: names and query values
//! escaped once, `project=` added once, and each typed body the JSON LXD was sent before it was
//! typed.

use std::path::Path;

use serde_json::json;

use super::backups::{InstanceBackupsPost, StoragePoolVolumeBackupsPost};
use super::client::to_json;
use super::images::{ImageAliasesEntryPut, ImagesPost, ImagesPostSource};
use super::instance_exec::InstanceExecPost;
use super::instances::{instance_url, InstancePut, InstanceSource, InstanceStatePut};
use super::networks::NetworksPost;
use super::storage::{custom_volume_url, StorageVolumesPost};
use super::Lxd;

fn lxd(project: &str) -> Lxd {
    Lxd::new(Path::new("/nonexistent/unix.socket"), project)
}

#[test]
fn names_and_the_project_are_escaped_once() {
    let lxd = lxd("course one/α");
    assert_eq!(
        lxd.url(&instance_url("a b/c?d")),
        "/1.0/instances/a%20b%2Fc%3Fd?project=course%20one%2F%CE%B1"
    );
    assert_eq!(
        lxd.url(&format!("{}?recursion=1", instance_url("web-1"))),
        "/1.0/instances/web-1?recursion=1&project=course%20one%2F%CE%B1",
        "a query already there gets project= after &"
    );
    assert_eq!(
        lxd.url(&custom_volume_url("default pool", "home-ann&x")),
        "/1.0/storage-pools/default%20pool/volumes/custom/home-ann%26x?project=course%20one%2F%CE%B1"
    );
    assert_eq!(
        lxd.unscoped()
            .url("/1.0/instances?all-projects=true&recursion=1"),
        "/1.0/instances?all-projects=true&recursion=1",
        "an unscoped listing names no project"
    );
    assert_eq!(
        super::operations::operation_url("../1.0/x"),
        "/1.0/operations/..%2F1.0%2Fx"
    );
}

#[test]
fn unreserved_characters_pass_and_every_other_byte_is_escaped() {
    assert_eq!(super::client::encode("Az09-_.~"), "Az09-_.~");
    assert_eq!(super::client::encode("/etc/x y"), "%2Fetc%2Fx%20y");
    assert_eq!(super::client::encode("%"), "%25");
    assert_eq!(super::client::encode("é"), "%C3%A9");
}

#[test]
fn state_changes_send_only_what_they_name() {
    let start = InstanceStatePut {
        action: "start",
        timeout: None,
        force: None,
    };
    assert_eq!(to_json(&start), json!({"action": "start"}));
    let stop = InstanceStatePut {
        action: "stop",
        timeout: Some(30),
        force: Some(false),
    };
    assert_eq!(
        to_json(&stop),
        json!({"action": "stop", "timeout": 30, "force": false})
    );
}

#[test]
fn a_patch_a_restore_and_a_replacement_carry_only_their_fields() {
    let patch = InstancePut::config([("boot.autostart".into(), "false".into())].into());
    assert_eq!(
        to_json(&patch),
        json!({"config": {"boot.autostart": "false"}})
    );
    let restore = InstancePut {
        restore: Some("snap0".into()),
        ..Default::default()
    };
    assert_eq!(to_json(&restore), json!({"restore": "snap0"}));

    let current: super::instances::InstanceCurrent = serde_json::from_value(json!({
        "name": "c1", "status": "Stopped", "architecture": "x86_64", "ephemeral": false,
        "profiles": [], "stateful": false, "description": "",
        "config": {"limits.cpu": "2"}, "devices": {"root": {"type": "disk", "path": "/"}},
        "expanded_config": {"limits.cpu": "2", "from.profile": "x"},
    }))
    .unwrap();
    assert_eq!(current.status, "Stopped");
    let put = InstancePut::replacing(&current, current.config(), Default::default());
    assert_eq!(
        to_json(&put),
        json!({"architecture": "x86_64", "ephemeral": false, "profiles": [], "stateful": false,
               "description": "", "config": {"limits.cpu": "2"}, "devices": {}}),
        "never the expanded config, every other writable field kept"
    );
}

#[test]
fn create_exec_image_and_volume_bodies_are_lxds() {
    let image = InstanceSource::Image {
        alias: "ubuntu".into(),
    };
    assert_eq!(to_json(&image), json!({"type": "image", "alias": "ubuntu"}));
    let copy = InstanceSource::Copy {
        source: "tmpl".into(),
        instance_only: true,
    };
    assert_eq!(
        to_json(&copy),
        json!({"type": "copy", "source": "tmpl", "instance_only": true})
    );
    let exec = InstanceExecPost::recorded(vec!["true".into()], Default::default());
    assert_eq!(
        to_json(&exec),
        json!({"command": ["true"], "environment": {}, "interactive": false,
               "wait-for-websocket": false, "record-output": true})
    );
    let publish = ImagesPost {
        source: ImagesPostSource {
            kind: "instance".into(),
            name: "c1".into(),
        },
        properties: [("description".to_string(), "d".to_string())].into(),
    };
    assert_eq!(
        to_json(&publish),
        json!({"source": {"type": "instance", "name": "c1"}, "properties": {"description": "d"}})
    );
    let alias = ImageAliasesEntryPut {
        target: "abc".into(),
        description: String::new(),
    };
    assert_eq!(to_json(&alias), json!({"target": "abc", "description": ""}));
    let volume = StorageVolumesPost {
        name: "home-ann".into(),
        kind: "custom".into(),
        content_type: "filesystem".into(),
        config: Default::default(),
    };
    assert_eq!(
        to_json(&volume),
        json!({"name": "home-ann", "type": "custom", "content_type": "filesystem", "config": {}})
    );
}

#[test]
fn backup_and_network_bodies_are_lxds() {
    let instance = InstanceBackupsPost {
        name: "cohort-move".into(),
        instance_only: false,
        optimized_storage: false,
        compression_algorithm: "none".into(),
    };
    assert_eq!(
        to_json(&instance),
        json!({"name": "cohort-move", "instance_only": false, "optimized_storage": false,
               "compression_algorithm": "none"})
    );
    let volume = StoragePoolVolumeBackupsPost {
        name: "cohort-move".into(),
        volume_only: false,
        optimized_storage: false,
        compression_algorithm: "none".into(),
    };
    assert_eq!(
        to_json(&volume),
        json!({"name": "cohort-move", "volume_only": false, "optimized_storage": false,
               "compression_algorithm": "none"})
    );
    let bridge = NetworksPost {
        name: "cohort0".into(),
        kind: "bridge".into(),
        config: [("ipv4.nat".to_string(), "true".to_string())].into(),
    };
    assert_eq!(
        to_json(&bridge),
        json!({"name": "cohort0", "type": "bridge", "config": {"ipv4.nat": "true"}})
    );
}
