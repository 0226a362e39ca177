//! The wire's own rules for names and keys, checked wherever a value enters Cohort (the REST API,
//! roster import, the agent API) so that nothing malformed ever reaches LXD or a shell.

use ssh_key::authorized_keys::Entry;
use ssh_key::{Algorithm, EcdsaCurve, PublicKey};

/// Why a value was refused; the message names the problem, the caller adds the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

fn invalid<T>(msg: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid(msg.into()))
}

/// LXD's instance name rules: 1-63 characters of a-z, 0-9 and '-', no '-' at either end, not
/// all digits (so it is a valid hostname too).
pub fn instance_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > 63 {
        return invalid("must be 1 to 63 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return invalid("may contain only a-z, 0-9 and '-'");
    }
    if name.starts_with('-') || name.ends_with('-') {
        return invalid("must not start or end with '-'");
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return invalid("must not be all digits");
    }
    Ok(())
}

/// Accounts that exist in every template image or that a student must never get.
const RESERVED_USERNAMES: &[&str] = &[
    "root",
    "daemon",
    "bin",
    "sys",
    "sync",
    "games",
    "man",
    "lp",
    "mail",
    "news",
    "uucp",
    "proxy",
    "www-data",
    "backup",
    "list",
    "irc",
    "gnats",
    "nobody",
    "sshd",
    "messagebus",
    "admin",
    "ubuntu",
    "debian",
    "cohort",
    "lxd",
    "sudo",
    "adm",
    "staff",
    "users",
];

/// A Linux login name useradd accepts everywhere: a lowercase letter or '_' first, then a-z,
/// 0-9, '_' or '-', at most 32 characters, and not a system account.
pub fn username(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > 32 {
        return invalid("must be 1 to 32 characters");
    }
    let mut bytes = name.bytes();
    let first = bytes.next().unwrap_or(b'-');
    if !(first.is_ascii_lowercase() || first == b'_') {
        return invalid("must start with a lowercase letter or '_'");
    }
    if !bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-') {
        return invalid("may contain only a-z, 0-9, '_' and '-'");
    }
    if RESERVED_USERNAMES.contains(&name) || name.starts_with("systemd-") || name.starts_with('_') {
        return invalid(format!("'{name}' is reserved for the system"));
    }
    Ok(())
}

/// One OpenSSH public key line as it may go into `authorized_keys`: ed25519, ecdsa (nistp256/
/// 384/521) or rsa of at least 2048 bits, with no options (`command=`, `from=`, ...). Returns the
/// key in canonical form (`type base64 comment`).
pub fn ssh_public_key(line: &str) -> Result<String, Invalid> {
    let line = line.trim_matches(|c| c == ' ' || c == '\t');
    if line.is_empty() {
        return invalid("is empty");
    }
    if line.contains(['\n', '\r', '\0']) {
        return invalid("must be a single line");
    }
    let entry: Entry = line.parse().map_err(|_| {
        Invalid("is not an OpenSSH public key (expected e.g. 'ssh-ed25519 AAAA... comment')".into())
    })?;
    if !entry.config_opts().is_empty() {
        return invalid(format!(
            "has options ('{}'); keys with command=, from= or other options are not accepted",
            entry.config_opts().as_str()
        ));
    }
    check_algorithm(entry.public_key())?;
    entry
        .public_key()
        .to_openssh()
        .map_err(|e| Invalid(format!("cannot be re-encoded: {e}")))
}

fn check_algorithm(key: &PublicKey) -> Result<(), Invalid> {
    match key.algorithm() {
        Algorithm::Ed25519 => Ok(()),
        Algorithm::Ecdsa {
            curve: EcdsaCurve::NistP256 | EcdsaCurve::NistP384 | EcdsaCurve::NistP521,
        } => Ok(()),
        Algorithm::Rsa { .. } => {
            let bits = key
                .key_data()
                .rsa()
                .map(|rsa| {
                    let n = rsa.n.as_positive_bytes().unwrap_or(&[]);
                    let lead = n.first().map_or(8, |b| b.leading_zeros() as usize);
                    n.len() * 8 - lead
                })
                .unwrap_or(0);
            if bits < 2048 {
                invalid(format!(
                    "is an RSA key of {bits} bits; at least 2048 are required"
                ))
            } else {
                Ok(())
            }
        }
        other => invalid(format!(
            "has type {}; only ed25519, ecdsa and rsa (2048+ bits) are accepted",
            other.as_str()
        )),
    }
}

/// Free text (a display name, a title) that is safe everywhere it is shown: no control
/// characters, at most `max` characters, and nothing a spreadsheet would run as a formula.
pub fn display_text(text: &str, max: usize) -> Result<(), Invalid> {
    if text.chars().count() > max {
        return invalid(format!("must be at most {max} characters"));
    }
    if text.chars().any(char::is_control) {
        return invalid("must not contain control characters (newline, tab, NUL, ...)");
    }
    if text.starts_with(['=', '+', '-', '@']) {
        return invalid("must not start with '=', '+', '-' or '@' (a spreadsheet formula)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@lab";

    #[test]
    fn instance_names_follow_lxd_rules() {
        for good in ["a", "demo101-alice", "a1", "x-1-y"] {
            assert_eq!(instance_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "123",
            "a_b",
            "ä",
            "../x",
            "A",
            &"a".repeat(64),
        ] {
            assert!(instance_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn usernames_follow_linux_rules() {
        for good in ["alice", "bob_2", "c-d", "x"] {
            assert_eq!(username(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "-a",
            "1abc",
            "Alice",
            "a b",
            "ä",
            "root",
            "../x",
            &"a".repeat(33),
        ] {
            assert!(username(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ssh_keys_accept_ed25519_and_refuse_options_garbage_and_two_lines() {
        assert!(ssh_public_key(ED25519).is_ok());
        let with_cmd = format!("command=\"/bin/sh\" {ED25519}");
        let err = ssh_public_key(&with_cmd).unwrap_err().0;
        assert!(err.contains("options"), "{err}");
        let from = format!("from=\"10.0.0.1\" {ED25519}");
        assert!(ssh_public_key(&from).is_err());
        let two = format!("{ED25519}\n{ED25519}");
        assert!(ssh_public_key(&two).unwrap_err().0.contains("single line"));
        for garbage in ["gh:alice", "ssh-ed25519 notbase64", "hello", ""] {
            assert!(ssh_public_key(garbage).is_err(), "{garbage:?} accepted");
        }
    }

    #[test]
    fn display_text_refuses_formulas_and_control_characters() {
        assert!(display_text("Ada Lovelace", 100).is_ok());
        for bad in [
            "=HYPERLINK(\"x\")",
            "+1",
            "-2",
            "@SUM(A1)",
            "a\nb",
            "a\0b",
            "\tx",
        ] {
            assert!(display_text(bad, 100).is_err(), "{bad:?} accepted");
        }
    }
}
