//! The wire's rules for names and keys, shared by the controller (to refuse early) and the agent
//! (to refuse before anything reaches LXD): instance names, Unix usernames, SSH public keys.

use ssh_key::{Algorithm, PublicKey};

/// Smallest RSA modulus accepted for a student's key.
pub const RSA_MIN_BITS: usize = 2048;

/// Why a value broke a rule; `Display` is the message a 400 carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Invalid {}

fn invalid(msg: impl Into<String>) -> Result<(), Invalid> {
    Err(Invalid(msg.into()))
}

/// LXD's instance name rules: 1-63 characters of `a-z`, `0-9` and `-`, no `-` at either end,
/// not all digits (LXD also allows upper case, which Cohort never generates).
pub fn instance_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() || name.len() > 63 {
        return invalid(format!("instance name {name:?} must be 1-63 characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return invalid(format!(
            "instance name {name:?} may only contain a-z, 0-9 and '-'"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return invalid(format!(
            "instance name {name:?} must not start or end with '-'"
        ));
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return invalid(format!("instance name {name:?} must not be all digits"));
    }
    Ok(())
}

/// A portable Unix username (Debian's default `NAME_REGEX` for `useradd`): starts with a lower
/// case letter or `_`, then `a-z 0-9 _ -`, at most 32 characters; never `root`.
pub fn username(name: &str) -> Result<(), Invalid> {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    let rest_ok =
        bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !first_ok || !rest_ok || name.len() > 32 {
        return invalid(format!(
            "username {name:?} must be 1-32 characters of a-z, 0-9, '_' and '-', starting with a letter or '_'"
        ));
    }
    if RESERVED_USERNAMES.contains(&name) || name.starts_with("systemd-") {
        return invalid(format!("username {name:?} is reserved for the system"));
    }
    Ok(())
}

/// Accounts every template image has, or that a student must never get.
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
    "_apt",
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

/// One OpenSSH public key line as it goes into `authorized_keys`: a single line, type ed25519,
/// ecdsa (nistp256/384/521) or rsa of at least 2048 bits, and no options (`command=`, `from=`, ...)
/// in front of it. Returns the key re-encoded in canonical form (type, base64, comment).
pub fn ssh_public_key(line: &str) -> Result<String, Invalid> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.contains(['\n', '\r']) {
        return Err(Invalid("SSH key must be a single line".into()));
    }
    let line = line.trim();
    if line.is_empty() {
        return Err(Invalid("SSH key is empty".into()));
    }
    let first = line.split_whitespace().next().unwrap_or_default();
    let looks_like_type =
        first.starts_with("ssh-") || first.starts_with("ecdsa-") || first.starts_with("sk-");
    if !looks_like_type {
        return Err(Invalid(format!(
            "SSH key must start with its type (ssh-ed25519, ecdsa-sha2-*, ssh-rsa); options such as command= or from= are not allowed (found {first:?})"
        )));
    }
    let key = PublicKey::from_openssh(line)
        .map_err(|e| Invalid(format!("SSH key does not parse: {e}")))?;
    match key.algorithm() {
        Algorithm::Ed25519 | Algorithm::Ecdsa { .. } => {}
        Algorithm::Rsa { .. } => {
            let bits = key
                .key_data()
                .rsa()
                .and_then(|rsa| rsa.n.as_positive_bytes())
                .map(rsa_bits)
                .unwrap_or(0);
            if bits < RSA_MIN_BITS {
                return Err(Invalid(format!(
                    "RSA SSH key has {bits} bits; at least {RSA_MIN_BITS} are required"
                )));
            }
        }
        other => {
            return Err(Invalid(format!(
                "SSH key type {other} is not accepted (use ed25519, ecdsa or rsa >= {RSA_MIN_BITS} bits)"
            )))
        }
    }
    key.to_openssh()
        .map_err(|e| Invalid(format!("SSH key does not encode: {e}")))
}

fn rsa_bits(modulus: &[u8]) -> usize {
    match modulus.first() {
        Some(&top) => modulus.len() * 8 - top.leading_zeros() as usize,
        None => 0,
    }
}

/// A crypt(3) hash for `usermod -p`: `$id$...` form, printable, no `:` (it would break
/// `/etc/shadow`) and no whitespace.
pub fn password_hash(hash: &str) -> Result<(), Invalid> {
    let printable = hash.bytes().all(|b| b.is_ascii_graphic() && b != b':');
    if !hash.starts_with('$') || hash.len() < 8 || !printable {
        return invalid("password hash must be a crypt(3) hash such as $6$salt$... or $y$...");
    }
    Ok(())
}

/// Free text (a display name, a title) that is safe wherever it is shown: no control characters,
/// at most `max` characters, and nothing a spreadsheet would run as a formula.
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

    const ED25519: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIN4j9xJ2DuFqdAabTQjWmehKMbbXNP/68/vrLUocne8v alice@lab";

    #[test]
    fn instance_names_follow_lxd() {
        assert!(instance_name("cs101-alice").is_ok());
        for bad in ["", "-a", "a-", "Abc", "a_b", "123", &"a".repeat(64)] {
            assert!(instance_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn usernames_follow_useradd() {
        assert!(username("alice").is_ok());
        assert!(username("_svc-1").is_ok());
        for bad in [
            "",
            "1abc",
            "Alice",
            "a b",
            "root",
            "sshd",
            "a:b",
            &"a".repeat(33),
        ] {
            assert!(username(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn ed25519_key_is_accepted_and_canonical() {
        assert_eq!(ssh_public_key(&format!("  {ED25519}\n")).unwrap(), ED25519);
    }

    #[test]
    fn keys_with_options_or_two_lines_are_refused() {
        let opt = format!("command=\"/bin/sh\" {ED25519}");
        assert!(ssh_public_key(&opt).unwrap_err().0.contains("options"));
        let from = format!("from=\"10.0.0.1\" {ED25519}");
        assert!(ssh_public_key(&from).is_err());
        let two = format!("{ED25519}\n{ED25519}");
        assert!(ssh_public_key(&two).unwrap_err().0.contains("single line"));
        assert!(ssh_public_key("ssh-ed25519 AAAAnotbase64!!").is_err());
    }

    #[test]
    fn short_rsa_and_dsa_keys_are_refused() {
        // 1024-bit RSA key (ssh-keygen -t rsa -b 1024).
        let rsa1024 = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDAjf7akJEUjZ/Wxk1yqgLk3nmIC7mw/v8v88yIVIObQUZeZl+rswCZKaihpy0M/lKQVG6EpMVUmG6MsHDJTtyq7ZH6wTlY0ps1CeszdCO9bxWngRGz5rMYsGRSumPpFIcVDi3dAkmd9AaJ8Q64jCKYPujZD5ftK7sWYWUbKdh75w== root@vm";
        let err = ssh_public_key(rsa1024).unwrap_err().0;
        assert!(err.contains("1024 bits"), "{err}");
    }

    #[test]
    fn password_hash_rules() {
        assert!(password_hash("$6$salt$abcdefghijklmnop").is_ok());
        assert!(password_hash("plain").is_err());
        assert!(password_hash("$6$a:b$cdefghij").is_err());
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
