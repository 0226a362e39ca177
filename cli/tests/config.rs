//! The remotes file: round trip, lxc's `[<remote>:]<name>` rules, default-remote handling.

use cohort_cli::config::{Config, Remote};

fn remote(addr: &str) -> Remote {
    Remote {
        addr: addr.into(),
        token: "secret".into(),
        fingerprint: "ab".repeat(32),
    }
}

fn two_remotes(dir: &std::path::Path) -> Config {
    let mut config = Config::load(&dir.join("config.yml")).unwrap();
    config
        .add_remote("lab", remote("https://lab:8443"))
        .unwrap();
    config
        .add_remote("gpu2", remote("https://gpu2:8443"))
        .unwrap();
    config
}

#[test]
fn round_trip_keeps_everything_and_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/config.yml");
    let mut config = Config::load(&path).unwrap();
    assert!(
        config.remotes.is_empty(),
        "a missing file is an empty config"
    );
    config
        .add_remote("lab", remote("https://lab:8443"))
        .unwrap();
    config.save().unwrap();

    let again = Config::load(&path).unwrap();
    assert_eq!(again, config);
    assert_eq!(
        again.default_remote, "lab",
        "the first remote becomes the default"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("default-remote: lab"), "{text}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the file holds tokens");
}

#[test]
fn remote_prefix_parsing_follows_lxc() {
    let dir = tempfile::tempdir().unwrap();
    let config = two_remotes(dir.path());
    let parse = |raw| config.parse_remote(raw).unwrap();
    assert_eq!(parse("c1"), ("lab".into(), "c1".into()));
    assert_eq!(parse("gpu2:c1"), ("gpu2".into(), "c1".into()));
    assert_eq!(parse("gpu2:"), ("gpu2".into(), "".into()));
    assert_eq!(parse("gpu2:c1/snap0"), ("gpu2".into(), "c1/snap0".into()));
    let err = config.parse_remote("nope:c1").unwrap_err();
    assert_eq!(err.to_string(), "The remote \"nope\" doesn't exist");
}

#[test]
fn switch_remove_and_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = two_remotes(dir.path());
    assert_eq!(
        config
            .add_remote("lab", remote("https://x"))
            .unwrap_err()
            .to_string(),
        "Remote lab exists as <https://lab:8443>"
    );
    assert!(
        config.remove_remote("lab").is_err(),
        "the default cannot go"
    );
    config.switch_remote("gpu2").unwrap();
    config.remove_remote("lab").unwrap();
    assert_eq!(config.parse_remote("c1").unwrap().0, "gpu2");
    assert_eq!(
        config.switch_remote("lab").unwrap_err().to_string(),
        "Remote lab doesn't exist"
    );
    assert!(config.add_remote("bad name", remote("https://x")).is_err());
}

#[test]
fn no_remote_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::load(&dir.path().join("config.yml")).unwrap();
    let err = config.parse_remote("c1").unwrap_err().to_string();
    assert!(err.contains("cohort remote add"), "{err}");
}
