//! The wire's rules for names and keys, shared by the controller (to refuse early) and the agent
//! (to refuse before anything reaches LXD): instance names, Unix usernames, SSH public keys,
//! the instance config keys a request may set and the devices an admin may add.

use std::collections::BTreeMap;
use std::net::IpAddr;

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

/// A path inside a home, relative to it (`notes/week3.md`, `project`), to restore out of a
/// snapshot: not absolute, no `.` or `..` or empty part, no control characters, at most 4096
/// bytes. Links along it are the agent's to refuse (it alone sees the snapshot).
pub fn home_relative_path(path: &str) -> Result<(), Invalid> {
    let bad = |why: &str| {
        Err(Invalid(format!(
            "{why} (a path inside the home, like notes/week3.md)"
        )))
    };
    if path.is_empty() {
        return bad("must not be empty");
    }
    if path.len() > 4096 {
        return bad("is longer than 4096 bytes");
    }
    if path.starts_with('/') {
        return bad("must be relative to the home, not absolute");
    }
    if path.chars().any(char::is_control) {
        return bad("must not hold control characters");
    }
    let trimmed = path.strip_suffix('/').unwrap_or(path);
    for part in trimmed.split('/') {
        match part {
            ".." => return bad("must not hold `..`"),
            "" | "." => return bad("must not hold empty or `.` parts"),
            _ => {}
        }
    }
    Ok(())
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

/// Characters that reorder the text shown around them (Unicode's bidirectional embeddings,
/// overrides, isolates and marks): a title with U+202E shows its tail reversed, so what a reader
/// sees is not what was written.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Free text (a display name, a title) that is safe wherever it is shown: no control or
/// bidirectional control characters, at most `max` characters, and nothing a spreadsheet would
/// run as a formula.
pub fn display_text(text: &str, max: usize) -> Result<(), Invalid> {
    if text.chars().count() > max {
        return invalid(format!("must be at most {max} characters"));
    }
    if text.chars().any(char::is_control) {
        return invalid("must not contain control characters (newline, tab, NUL, ...)");
    }
    if text.chars().any(is_bidi_control) {
        return invalid(
            "must not contain bidirectional control characters (U+202A-U+202E, U+2066-U+2069, ...)",
        );
    }
    if text.starts_with(['=', '+', '-', '@']) {
        return invalid("must not start with '=', '+', '-' or '@' (a spreadsheet formula)");
    }
    Ok(())
}

/// Whether a character shows: not white space, not a format character (zero-width spaces and
/// joiners, direction marks, the BOM), not a variation selector, not a Hangul filler.
pub fn is_visible(c: char) -> bool {
    !c.is_whitespace()
        && !matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
            | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{E0000}'..='\u{E007F}')
}

/// A title that must say something: [`display_text`], and something visible in it (not empty,
/// not only spaces or zero-width characters).
pub fn title(text: &str, max: usize) -> Result<(), Invalid> {
    if !text.chars().any(is_visible) {
        return invalid("must not be empty or only invisible characters");
    }
    display_text(text, max)
}

/// Config keys a request may set (at create or live) besides `user.*` and `environment.*`.
/// `limits.cpu` and `limits.memory` are not among them: they come from the instance's limits,
/// which placement counts.
pub const ALLOWED_CONFIG_KEYS: &[&str] = &[
    "boot.autostart.delay",
    "boot.autostart.priority",
    "boot.stop.priority",
    "limits.cpu.allowance",
    "limits.cpu.priority",
    "limits.memory.swap",
    "limits.processes",
    "snapshots.schedule",
    "snapshots.schedule.stopped",
    "snapshots.expiry",
    "snapshots.pattern",
];

/// Set by the agent alone, from the desired state: a request setting it could make a stopped
/// container come back on the next reboot.
pub const OWNED_AUTOSTART_KEY: &str = "boot.autostart";

/// Prefixes refused outright, whatever follows: LXD's escape hatches and Cohort's own keys.
pub const FORBIDDEN_CONFIG_PREFIXES: &[&str] =
    &["security.", "raw.", "nvidia.", "volatile.", "user.cohort."];

/// A config key a request may set or unset: `user.*` and `environment.*` (the rest of the key
/// `a-z A-Z 0-9 . _ -`), or one of [`ALLOWED_CONFIG_KEYS`].
pub fn config_key(key: &str) -> Result<(), Invalid> {
    if let Some(prefix) = FORBIDDEN_CONFIG_PREFIXES
        .iter()
        .find(|p| key.starts_with(**p))
    {
        return invalid(format!(
            "config key {key:?} is not allowed: keys under {prefix}* may not be set by a request"
        ));
    }
    if key == OWNED_AUTOSTART_KEY {
        return invalid(format!(
            "config key {key:?} is not allowed: Cohort sets it to follow the instance's desired state"
        ));
    }
    let free = ["user.", "environment."].iter().any(|prefix| {
        key.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
    });
    if !free && !ALLOWED_CONFIG_KEYS.contains(&key) {
        return invalid(format!(
            "config key {key:?} is not allowed (only user.*, environment.* and {})",
            ALLOWED_CONFIG_KEYS.join(", ")
        ));
    }
    Ok(())
}

/// Longest config value a request may set.
pub const MAX_CONFIG_VALUE: usize = 4096;
/// Most `user.*` and `environment.*` keys one instance may carry.
pub const MAX_FREE_CONFIG_KEYS: usize = 64;
/// Most bytes (keys and values) of all `user.*` and `environment.*` keys of one instance.
pub const MAX_FREE_CONFIG_BYTES: usize = 64 * 1024;

/// A config value: one line of at most [`MAX_CONFIG_VALUE`] bytes, no control characters.
pub fn config_value(value: &str) -> Result<(), Invalid> {
    if value.len() > MAX_CONFIG_VALUE || value.chars().any(char::is_control) {
        return invalid(format!(
            "value must be one line of at most {MAX_CONFIG_VALUE} bytes without control characters"
        ));
    }
    Ok(())
}

/// Whether a caller names the key freely (`user.*`, `environment.*`), as opposed to one of
/// LXD's own keys or Cohort's `user.cohort.*`.
fn is_free_key(key: &str) -> bool {
    (key.starts_with("user.") || key.starts_with("environment.")) && config_key(key).is_ok()
}

/// The `user.*` and `environment.*` keys an instance would carry (all of its config, the
/// other keys are skipped): at most [`MAX_FREE_CONFIG_KEYS`] keys and
/// [`MAX_FREE_CONFIG_BYTES`] bytes, so a caller cannot grow an instance's LXD config (stored by
/// LXD and copied into every snapshot) without bound.
pub fn free_config_size<'a>(
    config: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<(), Invalid> {
    let (mut keys, mut bytes) = (0usize, 0usize);
    for (key, value) in config.into_iter().filter(|(k, _)| is_free_key(k)) {
        keys += 1;
        bytes += key.len() + value.len();
    }
    if keys > MAX_FREE_CONFIG_KEYS {
        return invalid(format!(
            "an instance may carry at most {MAX_FREE_CONFIG_KEYS} user.* and environment.* keys; this change leaves {keys}"
        ));
    }
    if bytes > MAX_FREE_CONFIG_BYTES {
        return invalid(format!(
            "an instance's user.* and environment.* keys may hold at most {MAX_FREE_CONFIG_BYTES} bytes; this change leaves {bytes}"
        ));
    }
    Ok(())
}

/// An exec's command, environment and working directory as the kernel takes them: no NUL in
/// any of them (`execve` cannot pass one), no `=` in a variable's name, no variable named like
/// the one the agent tags every exec with. Names the field at fault (`command.1`,
/// `environment.NAME`, `cwd`).
pub fn exec_request(
    command: &[String],
    environment: &BTreeMap<String, String>,
    cwd: Option<&str>,
) -> Result<(), FieldInvalid> {
    let fail = |field: String, message: &str| {
        Err(FieldInvalid {
            field,
            message: message.to_string(),
        })
    };
    if command.first().is_none_or(String::is_empty) {
        return fail("command".into(), "must name a program");
    }
    if let Some(i) = command.iter().position(|arg| arg.contains('\0')) {
        return fail(format!("command.{i}"), "must not contain a NUL character");
    }
    for (name, value) in environment {
        let field = format!("environment.{name}");
        if name.is_empty() || name.contains(['=', '\0']) {
            return fail(
                field,
                "a variable name must be non-empty, without '=' or NUL",
            );
        }
        if name == EXEC_TAG_VAR {
            return fail(field, "this variable is set by Cohort");
        }
        if value.contains('\0') {
            return fail(field, "must not contain a NUL character");
        }
    }
    if cwd.is_some_and(|c| c.contains('\0')) {
        return fail("cwd".into(), "must not contain a NUL character");
    }
    Ok(())
}

/// The environment variable the agent tags every exec's processes with, to find them again.
pub const EXEC_TAG_VAR: &str = "COHORT_EXEC";

/// The root disk and the devices the agent makes (SSH proxy, home volume, allocated GPUs).
pub fn is_cohort_device(name: &str) -> bool {
    name == "root" || name.starts_with("cohort-")
}

/// Where a device check failed: the field (`devices.<name>.<key>`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldInvalid {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for FieldInvalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// What a device may point at on this node.
#[derive(Debug, Clone)]
pub struct DeviceRules {
    /// Whether a `disk` may take a host path as its source (admins only).
    pub allow_host_path: bool,
    /// Addresses a `proxy` may listen on (loopback is always allowed).
    pub listen_addresses: Vec<IpAddr>,
    /// State directories of this side besides [`DEFAULT_STATE_DIRS`], refused as host paths.
    pub state_dirs: Vec<String>,
}

/// A device an admin adds to a live instance: a `disk` (a custom volume of the node's pool, or
/// for admins a host path other than `/`) or a `proxy` listening on loopback or a node address.
/// Everything else (nic, unix-char, unix-block, gpu, ...) is refused: GPUs belong to the allocator.
pub fn device(
    name: &str,
    dev: &BTreeMap<String, String>,
    rules: &DeviceRules,
) -> Result<(), FieldInvalid> {
    let base = format!("devices.{name}");
    let fail = |field: String, message: String| Err(FieldInvalid { field, message });
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !name_ok {
        return fail(
            base,
            "device name must be 1-63 characters of a-z, A-Z, 0-9, '-', '_' and '.'".into(),
        );
    }
    if is_cohort_device(name) {
        return fail(
            base,
            format!("device name {name:?} is reserved for Cohort's own devices (root, cohort-*)"),
        );
    }
    for (key, value) in dev {
        if value.chars().any(char::is_control) || value.len() > 4096 {
            return fail(
                format!("{base}.{key}"),
                "value must be one line of at most 4096 bytes".into(),
            );
        }
    }
    let kind = dev.get("type").map(String::as_str).unwrap_or_default();
    let allowed: &[&str] = match kind {
        "disk" => &["type", "source", "path", "pool", "readonly"],
        "proxy" => &["type", "listen", "connect", "bind"],
        "" => {
            return fail(
                format!("{base}.type"),
                "a device needs a type (disk or proxy)".into(),
            )
        }
        "gpu" => {
            return fail(
                format!("{base}.type"),
                "GPUs are attached by Cohort's allocator, not as devices".into(),
            )
        }
        other => {
            return fail(
                format!("{base}.type"),
                format!("device type {other:?} is not allowed (only disk and proxy)"),
            )
        }
    };
    if let Some(key) = dev.keys().find(|k| !allowed.contains(&k.as_str())) {
        return fail(
            format!("{base}.{key}"),
            format!(
                "key {key:?} is not allowed on a {kind} device (allowed: {})",
                allowed.join(", ")
            ),
        );
    }
    if kind == "disk" {
        disk(&base, dev, rules)
    } else {
        proxy(&base, dev, rules)
    }
}

fn safe_absolute(path: &str) -> bool {
    path.starts_with('/') && !path.split('/').any(|c| c == ".." || c == ".")
}

/// Host trees never mounted into a container, with everything under them: the kernel's views
/// (`/proc/self/root` is the host's `/`) and devices.
pub const REFUSED_HOST_TREES: &[&str] = &["/proc", "/sys", "/dev"];

/// Where Cohort, LXD and Incus, and what they stand on, keep their state and secrets by default:
/// never mounted, nor any directory above them (mounting `/var/lib` exposes them all).
/// PostgreSQL's data and configuration hold the inventory and its passwords, root's home the
/// admin CLI's token, `/etc/cohort` the services' configuration. The agent adds the directories
/// it really uses.
pub const DEFAULT_STATE_DIRS: &[&str] = &[
    "/var/lib/cohort",
    "/var/lib/cohort-agent",
    "/var/lib/lxd",
    "/var/snap/lxd",
    "/var/lib/incus",
    "/var/lib/postgresql",
    "/etc/postgresql",
    "/etc/cohort",
    "/root",
];

/// A host path a disk device may mount: absolute, not `/`, outside [`REFUSED_HOST_TREES`], and
/// neither inside nor above any of `state_dirs`. Lexical only: the agent checks the path again
/// once it has resolved its links on the host.
pub fn host_path(path: &str, state_dirs: &[String]) -> Result<(), Invalid> {
    let trimmed = path.trim_end_matches('/');
    if !safe_absolute(path) || trimmed.is_empty() || path.contains("//") {
        return invalid("a host path must be absolute, not / and without . or .. parts");
    }
    let p = std::path::Path::new(trimmed);
    if let Some(tree) = REFUSED_HOST_TREES.iter().find(|t| p.starts_with(t)) {
        return invalid(format!("host paths under {tree} may not be mounted"));
    }
    let state = state_dirs
        .iter()
        .map(String::as_str)
        .chain(DEFAULT_STATE_DIRS.iter().copied());
    for dir in state {
        let dir = std::path::Path::new(dir);
        if p.starts_with(dir) || dir.starts_with(p) {
            return invalid(format!(
                "{path} holds or lies within {}, which Cohort or LXD keeps its state in",
                dir.display()
            ));
        }
    }
    Ok(())
}

fn disk(
    base: &str,
    dev: &BTreeMap<String, String>,
    rules: &DeviceRules,
) -> Result<(), FieldInvalid> {
    let fail = |key: &str, message: &str| {
        Err(FieldInvalid {
            field: format!("{base}.{key}"),
            message: message.to_string(),
        })
    };
    let path = dev.get("path").map(String::as_str).unwrap_or_default();
    if !safe_absolute(path) || path.trim_end_matches('/').is_empty() {
        return fail(
            "path",
            "path inside the instance must be absolute, not / and without . or .. parts",
        );
    }
    let source = dev.get("source").map(String::as_str).unwrap_or_default();
    if source.starts_with('/') {
        if !rules.allow_host_path {
            return fail("source", "only an admin may mount a host path");
        }
        if let Err(e) = host_path(source, &rules.state_dirs) {
            return fail("source", &e.0);
        }
        if dev.contains_key("pool") {
            return fail("pool", "a host path has no pool");
        }
    } else if instance_name(source).is_err() {
        return fail(
            "source",
            "source must be a custom volume of the node's pool (1-63 of a-z, 0-9 and '-') or an absolute host path",
        );
    }
    if let Some(ro) = dev.get("readonly") {
        if ro != "true" && ro != "false" {
            return fail("readonly", "must be true or false");
        }
    }
    Ok(())
}

/// `tcp:ADDR:PORT` or `udp:ADDR:PORT` (IPv6 in brackets).
fn endpoint(value: &str) -> Option<(IpAddr, u16)> {
    let rest = value
        .strip_prefix("tcp:")
        .or_else(|| value.strip_prefix("udp:"))?;
    let (addr, port) = rest.rsplit_once(':')?;
    let addr: IpAddr = addr
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    Some((addr, port))
}

fn proxy(
    base: &str,
    dev: &BTreeMap<String, String>,
    rules: &DeviceRules,
) -> Result<(), FieldInvalid> {
    let fail = |key: &str, message: String| {
        Err(FieldInvalid {
            field: format!("{base}.{key}"),
            message,
        })
    };
    let listen = dev.get("listen").map(String::as_str).unwrap_or_default();
    let Some((addr, _)) = endpoint(listen) else {
        return fail(
            "listen",
            "listen must be tcp:ADDRESS:PORT or udp:ADDRESS:PORT".into(),
        );
    };
    if !addr.is_loopback() && !rules.listen_addresses.contains(&addr) {
        let mut allowed = vec!["127.0.0.1".to_string()];
        allowed.extend(rules.listen_addresses.iter().map(IpAddr::to_string));
        return fail(
            "listen",
            format!("a proxy may listen only on {}", allowed.join(" or ")),
        );
    }
    let connect = dev.get("connect").map(String::as_str).unwrap_or_default();
    if endpoint(connect).is_none() {
        return fail(
            "connect",
            "connect must be tcp:ADDRESS:PORT or udp:ADDRESS:PORT".into(),
        );
    }
    if dev.get("bind").is_some_and(|b| b != "host") {
        return fail(
            "bind",
            "only bind=host (listen on the node) is allowed".into(),
        );
    }
    Ok(())
}

/// An IPv4 network `A.B.C.D/N` (or a single address, as `/32`): its address and prefix length.
pub fn ipv4_cidr(text: &str) -> Result<(std::net::Ipv4Addr, u8), Invalid> {
    let bad = || {
        Invalid(format!(
            "{text:?} is not an IPv4 address or CIDR like 192.0.2.0/24"
        ))
    };
    let (addr, prefix) = match text.split_once('/') {
        Some((a, p)) => (a, p.parse::<u8>().map_err(|_| bad())?),
        None => (text, 32),
    };
    let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| bad())?;
    if prefix > 32 {
        return Err(bad());
    }
    Ok((addr, prefix))
}

/// One egress destination: `CIDR` or `CIDR:PORT` (TCP and UDP).
pub fn egress_destination(text: &str) -> Result<(std::net::Ipv4Addr, u8, Option<u16>), Invalid> {
    let (cidr, port) = match text.rsplit_once(':') {
        Some((c, p)) => {
            let port = p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| Invalid(format!("{text:?}: port must be 1-65535")))?;
            (c, Some(port))
        }
        None => (text, None),
    };
    let (addr, prefix) = ipv4_cidr(cidr)?;
    Ok((addr, prefix, port))
}

/// A network policy: every egress destination and every `ssh_from` CIDR parses, at most 256 of
/// each. The error names the field (`egress.allow[i]`, `ssh_from[i]`).
pub fn network_policy(policy: &crate::agent::NetworkPolicy) -> Result<(), FieldInvalid> {
    const MOST: usize = 256;
    let fail = |field: String, message: String| Err(FieldInvalid { field, message });
    if let crate::agent::Egress::Allow(list) = &policy.egress {
        if list.is_empty() || list.len() > MOST {
            return fail(
                "egress.allow".into(),
                format!("must list 1-{MOST} destinations (use none for nowhere)"),
            );
        }
        for (i, entry) in list.iter().enumerate() {
            if let Err(e) = egress_destination(entry) {
                return fail(format!("egress.allow[{i}]"), e.0);
            }
        }
    }
    if policy.ssh_from.len() > MOST {
        return fail("ssh_from".into(), format!("at most {MOST} CIDRs"));
    }
    for (i, entry) in policy.ssh_from.iter().enumerate() {
        if let Err(e) = ipv4_cidr(entry) {
            return fail(format!("ssh_from[{i}]"), e.0);
        }
    }
    Ok(())
}

#[cfg(test)]
mod network_policy_tests {
    use super::*;
    use crate::agent::{Egress, NetworkPolicy};

    #[test]
    fn destinations_and_sources_parse_and_bad_ones_name_their_field() {
        assert_eq!(
            egress_destination("192.0.2.0/24:443").unwrap(),
            ("192.0.2.0".parse().unwrap(), 24, Some(443))
        );
        assert_eq!(
            egress_destination("198.51.100.7").unwrap(),
            ("198.51.100.7".parse().unwrap(), 32, None)
        );
        assert!(egress_destination("192.0.2.0/33").is_err());
        assert!(egress_destination("192.0.2.0/24:0").is_err());
        assert!(egress_destination("example.org:80").is_err());
        let ok = NetworkPolicy {
            egress: Egress::Allow(vec!["10.0.0.0/8:3128".into()]),
            ssh_from: vec!["192.0.2.0/24".into()],
        };
        assert!(network_policy(&ok).is_ok());
        let bad = NetworkPolicy {
            egress: Egress::Allow(vec!["10.0.0.0/8".into(), "nope".into()]),
            ssh_from: Vec::new(),
        };
        assert_eq!(network_policy(&bad).unwrap_err().field, "egress.allow[1]");
        let bad = NetworkPolicy {
            egress: Egress::Open,
            ssh_from: vec!["0.0.0.0/0".into(), "::/0".into()],
        };
        assert_eq!(network_policy(&bad).unwrap_err().field, "ssh_from[1]");
        let empty = NetworkPolicy {
            egress: Egress::Allow(Vec::new()),
            ssh_from: Vec::new(),
        };
        assert_eq!(network_policy(&empty).unwrap_err().field, "egress.allow");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_path_stays_inside() {
        for good in [
            "notes/week3.md",
            "project",
            "project/",
            ".bashrc",
            "a b/c..d",
        ] {
            assert!(home_relative_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../b",
            "a//b",
            "./a",
            "a/.",
            "a\nb",
        ] {
            assert!(home_relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_title_must_show_something() {
        assert!(title("Systems", 200).is_ok());
        assert!(title("机器学习", 200).is_ok());
        for blank in [
            "",
            "   ",
            "\u{200B}\u{200C}\u{200D}",
            "\u{FEFF}",
            "\u{3164}\u{3164}",
        ] {
            assert!(title(blank, 200).is_err(), "{blank:?}");
        }
    }

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

    #[test]
    fn config_keys_share_one_allowlist() {
        for good in [
            "user.course",
            "environment.HTTP_PROXY",
            "boot.autostart.priority",
            "limits.processes",
        ] {
            assert!(config_key(good).is_ok(), "{good}");
        }
        for bad in [
            "raw.lxc",
            "boot.autostart",
            "security.privileged",
            "volatile.idmap.next",
            "user.cohort.spec",
            "limits.cpu",
            "limits.memory",
            "foo",
            "user.",
            "user.a b",
        ] {
            assert!(config_key(bad).is_err(), "{bad} accepted");
        }
        assert!(config_value("a\nb").is_err());
    }

    #[test]
    fn devices_are_disk_or_proxy_within_bounds() {
        let rules = DeviceRules {
            allow_host_path: false,
            listen_addresses: vec!["10.0.0.5".parse().unwrap()],
            state_dirs: vec!["/srv/cohort-state".into()],
        };
        let dev = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let field = |name: &str, d: BTreeMap<String, String>, r: &DeviceRules| {
            device(name, &d, r).unwrap_err().field
        };
        let vol = dev(&[("type", "disk"), ("source", "data"), ("path", "/data")]);
        assert!(device("data", &vol, &rules).is_ok());
        let web = dev(&[
            ("type", "proxy"),
            ("listen", "tcp:127.0.0.1:8080"),
            ("connect", "tcp:127.0.0.1:80"),
        ]);
        assert!(device("web", &web, &rules).is_ok());
        let node = dev(&[
            ("type", "proxy"),
            ("listen", "tcp:10.0.0.5:8080"),
            ("connect", "tcp:127.0.0.1:80"),
        ]);
        assert!(device("web", &node, &rules).is_ok());
        let wide = dev(&[
            ("type", "proxy"),
            ("listen", "tcp:0.0.0.0:8080"),
            ("connect", "tcp:127.0.0.1:80"),
        ]);
        assert_eq!(field("web", wide, &rules), "devices.web.listen");
        for kind in ["unix-char", "unix-block", "nic", "gpu"] {
            assert_eq!(field("x", dev(&[("type", kind)]), &rules), "devices.x.type");
        }
        let host = dev(&[("type", "disk"), ("source", "/srv/data"), ("path", "/data")]);
        assert_eq!(field("h", host.clone(), &rules), "devices.h.source");
        let admin = DeviceRules {
            allow_host_path: true,
            ..rules.clone()
        };
        assert!(device("h", &host, &admin).is_ok());
        let slash = dev(&[("type", "disk"), ("source", "/"), ("path", "/host")]);
        assert_eq!(field("h", slash, &admin), "devices.h.source");
        let up = dev(&[("type", "disk"), ("source", "/srv/../etc"), ("path", "/x")]);
        assert_eq!(field("h", up, &admin), "devices.h.source");
        assert_eq!(
            field("cohort-ssh", vol.clone(), &admin),
            "devices.cohort-ssh"
        );
        assert_eq!(field("root", vol, &admin), "devices.root");
        let extra = dev(&[
            ("type", "disk"),
            ("source", "data"),
            ("path", "/d"),
            ("shift", "true"),
        ]);
        assert_eq!(field("d", extra, &admin), "devices.d.shift");
        for source in [
            "/proc/self/root",
            "/proc",
            "/sys/kernel",
            "/dev/sda",
            "/var/lib/lxd",
            "/var/lib/lxd/storage-pools",
            "/var/lib",
            "/var",
            "/srv/cohort-state/ca.key",
            "/srv",
            "//",
            "/proc//self",
            "/var/lib/postgresql/15/main",
            "/etc/postgresql",
            "/root",
            "/root/.config/cohort",
            "/etc",
        ] {
            let d = dev(&[("type", "disk"), ("source", source), ("path", "/x")]);
            assert_eq!(field("h", d, &admin), "devices.h.source", "{source} passed");
        }
        for source in ["/srv/data", "/home/shared", "/procfs-not", "/var/lib-data"] {
            assert!(
                host_path(source, &admin.state_dirs).is_ok(),
                "{source} refused"
            );
        }
    }

    #[test]
    fn free_config_keys_are_bounded_in_count_and_bytes() {
        let big = "v".repeat(MAX_CONFIG_VALUE);
        let keys: Vec<(String, String)> = (0..MAX_FREE_CONFIG_KEYS + 1)
            .map(|i| (format!("user.k{i}"), "x".to_string()))
            .collect();
        let pairs = |c: &[(String, String)]| {
            free_config_size(c.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        };
        assert!(pairs(&keys[..MAX_FREE_CONFIG_KEYS]).is_ok());
        assert!(pairs(&keys).is_err());
        let heavy: Vec<(String, String)> = (0..MAX_FREE_CONFIG_BYTES / MAX_CONFIG_VALUE)
            .map(|i| (format!("user.k{i}"), big.clone()))
            .collect();
        assert!(
            pairs(&heavy).is_err(),
            "{} bytes passed",
            heavy.len() * big.len()
        );
        // Cohort's own and LXD's keys are not the caller's to count.
        let own: Vec<(String, String)> = (0..MAX_FREE_CONFIG_KEYS * 2)
            .map(|i| (format!("user.cohort.k{i}"), "x".to_string()))
            .chain([("limits.cpu".to_string(), "1".to_string())])
            .collect();
        assert!(pairs(&own).is_ok());
    }
}
