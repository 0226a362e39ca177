//! Input rules shared by every action: LXD instance names, Linux usernames, the config keys a
//! caller may set, and text fields free of control characters.

use std::collections::BTreeMap;

use crate::error::{ActionError, ActionResult};

/// LXD's rules (shared with the agent): 1-63 of a-z, 0-9 and '-', no '-' at either end, not
/// all digits.
pub fn instance_name(field: &str, name: &str) -> ActionResult<()> {
    cohort_proto::validate::instance_name(name).map_err(|e| ActionError::invalid(field, e.0))
}

/// Linux username rules (shared with the agent): 1-32 of a-z, 0-9, '_' and '-', starting with a
/// letter or '_'; never `root`.
pub fn username(field: &str, name: &str) -> ActionResult<()> {
    cohort_proto::validate::username(name).map_err(|e| ActionError::invalid(field, e.0))
}

/// Config keys a caller may set: the rule shared with the agent (`user.*`, `environment.*` and
/// a short allow-list; never `security.*`, `raw.*`, `volatile.*`, `limits.cpu`/`limits.memory`
/// (set from the request's limits) or unknown keys).
pub fn config(field: &str, config: &BTreeMap<String, String>) -> ActionResult<()> {
    for (key, value) in config {
        let path = format!("{field}.{key}");
        cohort_proto::validate::config_key(key).map_err(|e| ActionError::invalid(&path, e.0))?;
        cohort_proto::validate::config_value(value)
            .map_err(|e| ActionError::invalid(&path, e.0))?;
    }
    config_size(field, config)
}

/// The `user.*` and `environment.*` keys an instance would carry, within the shared bounds.
pub fn config_size(field: &str, config: &BTreeMap<String, String>) -> ActionResult<()> {
    cohort_proto::validate::free_config_size(config.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .map_err(|e| ActionError::invalid(field, e.0))
}

/// The least memory an instance may have: less and LXD refuses `limits.memory`, or systemd
/// and sshd do not come up, so every provision of such a course would fail on the node.
pub const MIN_MEMORY_MIB: u64 = 64;

/// Refuses memory below [`MIN_MEMORY_MIB`].
pub fn memory_mib(field: &str, value: u64) -> ActionResult<()> {
    if value < MIN_MEMORY_MIB {
        return Err(ActionError::invalid(
            field,
            format!("{value} MiB is too little: an instance needs at least {MIN_MEMORY_MIB} MiB"),
        ));
    }
    Ok(())
}

/// Refuses a root disk smaller than the image it is made from (its tarball's size, a floor: the
/// unpacked root filesystem is larger still).
pub fn disk_for_image(field: &str, disk_gib: u64, image_bytes: i64) -> ActionResult<()> {
    let disk_bytes = disk_gib.saturating_mul(1 << 30);
    if image_bytes > 0 && disk_bytes < image_bytes as u64 {
        return Err(ActionError::invalid(
            field,
            format!("{disk_gib} GiB cannot hold the image ({image_bytes} bytes packed)"),
        ));
    }
    Ok(())
}

/// Refuses control characters (newline, NUL, ...) in a text field.
pub fn text(field: &str, value: &str) -> ActionResult<()> {
    if value.chars().any(char::is_control) {
        return Err(ActionError::invalid(
            field,
            "control characters are not allowed",
        ));
    }
    Ok(())
}

/// Longest name a person gives a thing of theirs (a token, a trusted client), in characters.
pub const MAX_LABEL_CHARS: usize = 100;

/// A name a person gives a thing of theirs: [`text`], at most [`MAX_LABEL_CHARS`] characters,
/// and something visible in it.
pub fn label(field: &str, value: &str) -> ActionResult<()> {
    text(field, value)?;
    if value.chars().count() > MAX_LABEL_CHARS {
        return Err(ActionError::invalid(
            field,
            format!("at most {MAX_LABEL_CHARS} characters"),
        ));
    }
    if !value.is_empty() && !value.chars().any(cohort_proto::validate::is_visible) {
        return Err(ActionError::invalid(
            field,
            "needs at least one visible character",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded_and_visible() {
        assert!(label("name", "laptop").is_ok());
        assert!(label("name", "").is_ok());
        assert!(label("name", &"x".repeat(MAX_LABEL_CHARS)).is_ok());
        assert!(label("name", &"x".repeat(MAX_LABEL_CHARS + 1)).is_err());
        assert!(label("name", "\u{200B}\u{200D}\u{FEFF}").is_err());
        assert!(label("name", "   ").is_err());
        assert!(label("name", "a\nb").is_err());
    }

    #[test]
    fn instance_names_follow_lxd_rules() {
        for good in ["a", "cs101-alice", "a1", "x-9", &"a".repeat(63)] {
            assert!(instance_name("name", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "123",
            &"a".repeat(64),
            "a_b",
            "ä",
            "../x",
            "A",
            "a b",
            "a\n",
        ] {
            let err = instance_name("name", bad).unwrap_err();
            assert!(
                matches!(err, ActionError::Invalid { ref field, .. } if field == "name"),
                "{bad}"
            );
        }
    }

    #[test]
    fn usernames_follow_linux_rules() {
        assert!(username("u", "alice_2").is_ok());
        assert!(username("u", "_svc").is_ok());
        for bad in [
            "",
            "-a",
            "1abc",
            "Alice",
            "ä",
            &"a".repeat(33),
            "a b",
            "root",
        ] {
            assert!(username("u", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn dangerous_and_unknown_config_keys_are_refused_by_name() {
        for key in [
            "raw.lxc",
            "security.privileged",
            "security.nesting",
            "raw.idmap",
            "limits.cpu",
            "foo",
            "user.",
        ] {
            let config = BTreeMap::from([(key.to_string(), "x".to_string())]);
            match config_err(&config) {
                ActionError::Invalid { field, .. } => assert_eq!(field, format!("config.{key}")),
                other => panic!("{key}: {other:?}"),
            }
        }
        let fine = BTreeMap::from([
            ("user.course".to_string(), "cs101".to_string()),
            ("boot.autostart.priority".to_string(), "1".to_string()),
        ]);
        assert!(super::config("config", &fine).is_ok());
        let nul = BTreeMap::from([("user.x".to_string(), "a\0b".to_string())]);
        assert!(super::config("config", &nul).is_err());
    }

    fn config_err(config: &BTreeMap<String, String>) -> ActionError {
        super::config("config", config).unwrap_err()
    }
}
