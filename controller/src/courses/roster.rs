//! Roster import: a class list as CSV (`username,name,email,ssh_key`) or a JSON array, checked
//! whole before anything changes. Every bad row is reported at once, by row number, so an
//! instructor fixes the file in one go; one bad row and nothing is imported.

use std::collections::HashMap;

use cohort_proto::validate;
use serde::{Deserialize, Serialize};

/// Most rows one roster may have.
pub const MAX_ROWS: usize = 5_000;
/// Largest roster file accepted, in bytes.
pub const MAX_BYTES: usize = 1024 * 1024;

/// One student as the roster gives them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RosterEntry {
    pub username: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub email: String,
    /// Canonical OpenSSH public key, or `None`: the student then gets a generated password.
    #[serde(default)]
    pub ssh_key: Option<String>,
}

/// A problem with one row. `row` counts as a spreadsheet does: in CSV the header is row 1; in
/// JSON the first element is row 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RowError {
    pub row: usize,
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "row {}: {}: {}", self.row, self.field, self.message)
    }
}

/// Why a roster was refused as a whole.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RosterError {
    /// roster is larger than 1 MiB
    #[error("roster is {0} bytes; the limit is {MAX_BYTES} (1 MiB)")]
    TooLarge(usize),
    /// roster has more rows than allowed
    #[error("roster has {0} rows; the limit is {MAX_ROWS}")]
    TooManyRows(usize),
    /// roster is not valid UTF-8
    #[error("roster is not UTF-8 text")]
    NotUtf8,
    /// the file is neither the CSV nor the JSON shape
    #[error("roster could not be read: {0}")]
    Format(String),
    /// some rows are invalid
    #[error("{} invalid row(s): {}", .0.len(), .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Rows(Vec<RowError>),
}

/// Parses and validates a roster; JSON when the text starts with `[`, CSV otherwise.
pub fn parse(bytes: &[u8]) -> Result<Vec<RosterEntry>, RosterError> {
    if bytes.len() > MAX_BYTES {
        return Err(RosterError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| RosterError::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (raw, first_row) = if text.trim_start().starts_with('[') {
        (parse_json(text)?, 1)
    } else {
        (parse_csv(text)?, 2)
    };
    if raw.len() > MAX_ROWS {
        return Err(RosterError::TooManyRows(raw.len()));
    }
    validate_rows(raw, first_row)
}

fn parse_json(text: &str) -> Result<Vec<RosterEntry>, RosterError> {
    serde_json::from_str(text).map_err(|e| RosterError::Format(format!("JSON: {e}")))
}

fn parse_csv(text: &str) -> Result<Vec<RosterEntry>, RosterError> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|e| RosterError::Format(format!("CSV header: {e}")))?
        .clone();
    let expected = ["username", "name", "email", "ssh_key"];
    let got: Vec<String> = headers.iter().map(str::to_ascii_lowercase).collect();
    if got != expected {
        return Err(RosterError::Format(format!(
            "CSV header must be '{}', found '{}'",
            expected.join(","),
            got.join(",")
        )));
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| RosterError::Format(format!("CSV row {}: {e}", i + 2)))?;
        let cell = |n: usize| record.get(n).unwrap_or("").to_string();
        let key = cell(3);
        rows.push(RosterEntry {
            username: cell(0),
            name: cell(1),
            email: cell(2),
            ssh_key: (!key.is_empty()).then_some(key),
        });
        if rows.len() > MAX_ROWS {
            return Err(RosterError::TooManyRows(rows.len()));
        }
    }
    Ok(rows)
}

fn validate_rows(raw: Vec<RosterEntry>, first_row: usize) -> Result<Vec<RosterEntry>, RosterError> {
    let mut errors = Vec::new();
    let mut seen_user: HashMap<String, usize> = HashMap::new();
    let mut seen_email: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::with_capacity(raw.len());
    for (i, mut entry) in raw.into_iter().enumerate() {
        let row = first_row + i;
        let mut fail = |field: &'static str, message: String| {
            errors.push(RowError {
                row,
                field,
                message,
            })
        };
        if let Err(e) = validate::username(&entry.username) {
            fail("username", e.0);
        } else if let Some(first) = seen_user.insert(entry.username.clone(), row) {
            fail(
                "username",
                format!("'{}' already appears in row {first}", entry.username),
            );
        }
        if let Err(e) = validate::display_text(&entry.name, 200) {
            fail("name", e.0);
        }
        if !entry.email.is_empty() {
            if let Err(e) = email(&entry.email) {
                fail("email", e);
            } else if let Some(first) = seen_email.insert(entry.email.to_lowercase(), row) {
                fail(
                    "email",
                    format!("'{}' already appears in row {first}", entry.email),
                );
            }
        }
        if let Some(key) = &entry.ssh_key {
            match validate::ssh_public_key(key) {
                Ok(canonical) => entry.ssh_key = Some(canonical),
                Err(e) => fail("ssh_key", e.0),
            }
        }
        out.push(entry);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(RosterError::Rows(errors))
    }
}

/// The shape of an address, not its deliverability: one '@', a local part, a dotted domain.
/// Shared with user creation, so an admin cannot make an account a roster would refuse.
pub fn email(addr: &str) -> Result<(), String> {
    let bad = || Err(format!("'{}' is not an email address", addr.escape_debug()));
    if addr.len() > 254 || addr.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return bad();
    }
    let Some((local, domain)) = addr.split_once('@') else {
        return bad();
    };
    let domain_ok = domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && domain
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '.');
    if local.is_empty() || local.len() > 64 || local.contains('@') || !domain_ok {
        return bad();
    }
    if addr.starts_with(['=', '+', '-', '@']) {
        return bad();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl a@b";

    #[test]
    fn csv_with_bom_and_crlf_is_read() {
        let text = format!(
            "\u{feff}username,name,email,ssh_key\r\nalice,Alice A,alice@uni.edu,{KEY}\r\nbob,Bob,,\r\n"
        );
        let rows = parse(text.as_bytes()).expect("valid roster");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].username, "alice");
        assert!(rows[0]
            .ssh_key
            .as_deref()
            .is_some_and(|k| k.starts_with("ssh-ed25519 ")));
        assert_eq!(rows[1].ssh_key, None);
    }

    #[test]
    fn json_array_is_read() {
        let text = format!(r#"[{{"username":"carol","ssh_key":"{KEY}"}},{{"username":"dave"}}]"#);
        let rows = parse(text.as_bytes()).expect("valid roster");
        assert_eq!(
            rows.iter().map(|r| r.username.as_str()).collect::<Vec<_>>(),
            ["carol", "dave"]
        );
    }

    #[test]
    fn every_bad_row_is_reported_with_its_number() {
        let text = format!(
            "username,name,email,ssh_key\n\
             Bad-Name,x,,\n\
             eve,Eve,eve@uni.edu,command=\"ls\" {KEY}\n\
             eve,Eve Again,,\n\
             frank,=HYPERLINK(\"http://x\"),frank@uni.edu,\n\
             grace,Grace,not-an-email,\n"
        );
        let Err(RosterError::Rows(errors)) = parse(text.as_bytes()) else {
            panic!("bad roster accepted");
        };
        let got: Vec<(usize, &str)> = errors.iter().map(|e| (e.row, e.field)).collect();
        assert_eq!(
            got,
            [
                (2, "username"),
                (3, "ssh_key"),
                (4, "username"),
                (5, "name"),
                (6, "email")
            ]
        );
        assert!(errors[1].message.contains("options"));
        assert!(errors[2].message.contains("row 3"));
    }

    #[test]
    fn wrong_header_size_and_row_limits_are_refused() {
        assert!(matches!(
            parse(b"user,name\nalice,A\n"),
            Err(RosterError::Format(m)) if m.contains("header")
        ));
        let big = vec![b'a'; MAX_BYTES + 1];
        assert_eq!(parse(&big), Err(RosterError::TooLarge(MAX_BYTES + 1)));
        let mut many = String::from("username,name,email,ssh_key\n");
        for i in 0..=MAX_ROWS {
            many.push_str(&format!("u{i},,,\n"));
        }
        assert_eq!(
            parse(many.as_bytes()),
            Err(RosterError::TooManyRows(MAX_ROWS + 1))
        );
        assert_eq!(parse(&[0xff, 0xfe]), Err(RosterError::NotUtf8));
    }
}
