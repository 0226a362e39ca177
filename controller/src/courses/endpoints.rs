//! The endpoints export an instructor hands to the class: CSV
//! (`username,instance,node,host,port,ssh_command,password,known_hosts`), JSON, an `ssh_config`
//! snippet or `known_hosts` lines (each container's own host key, so a student's first login
//! verifies the host instead of trusting it). CSV cells a spreadsheet would run as a formula are
//! neutralised.

use serde::Serialize;

/// One student's way in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    pub username: String,
    pub instance: String,
    pub node: String,
    pub host: String,
    pub port: u16,
    pub ssh_command: String,
    /// The generated password of a student without a key; shown here and nowhere else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `[host]:port ssh-ed25519 AAAA...`, the line for `~/.ssh/known_hosts`; absent until the
    /// container is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub known_hosts: Option<String>,
}

impl Endpoint {
    pub fn new(
        username: &str,
        instance: &str,
        node: &str,
        host: &str,
        port: u16,
        password: Option<String>,
        host_key: Option<&str>,
    ) -> Self {
        Endpoint {
            username: username.to_string(),
            instance: instance.to_string(),
            node: node.to_string(),
            host: host.to_string(),
            port,
            ssh_command: format!("ssh -p {port} {username}@{host}"),
            password,
            known_hosts: host_key.map(|key| known_hosts_line(host, port, key)),
        }
    }
}

/// A `known_hosts` line; ssh writes a host on a port other than 22 as `[host]:port`.
fn known_hosts_line(host: &str, port: u16, key: &str) -> String {
    if port == 22 {
        format!("{host} {key}")
    } else {
        format!("[{host}]:{port} {key}")
    }
}

/// `'` before a cell that starts like a formula (OWASP's CSV-injection advice).
fn neutralise(cell: &str) -> String {
    if cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{cell}")
    } else {
        cell.to_string()
    }
}

pub fn to_csv(endpoints: &[Endpoint]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let header = [
        "username",
        "instance",
        "node",
        "host",
        "port",
        "ssh_command",
        "password",
        "known_hosts",
    ];
    // Writing to a Vec cannot fail; the csv crate reports only I/O errors.
    let _ = w.write_record(header);
    for e in endpoints {
        let port = e.port.to_string();
        let row = [
            e.username.as_str(),
            &e.instance,
            &e.node,
            &e.host,
            &port,
            &e.ssh_command,
            e.password.as_deref().unwrap_or(""),
            e.known_hosts.as_deref().unwrap_or(""),
        ];
        let _ = w.write_record(row.iter().map(|c| neutralise(c)));
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

pub fn to_json(endpoints: &[Endpoint]) -> String {
    serde_json::to_string_pretty(endpoints).unwrap_or_else(|_| "[]".to_string())
}

/// `Host <instance>` blocks for `~/.ssh/config`.
pub fn to_ssh_config(endpoints: &[Endpoint]) -> String {
    endpoints
        .iter()
        .map(|e| {
            format!(
                "Host {}\n    HostName {}\n    Port {}\n    User {}\n",
                e.instance, e.host, e.port, e.username
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `known_hosts` lines of the containers made so far.
pub fn to_known_hosts(endpoints: &[Endpoint]) -> String {
    endpoints
        .iter()
        .filter_map(|e| e.known_hosts.as_deref())
        .map(|line| format!("{line}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_has_the_documented_columns_and_neutralises_formulas() {
        let rows = [
            Endpoint::new(
                "alice",
                "demo-alice",
                "n1",
                "127.0.0.1",
                20001,
                None,
                Some("ssh-ed25519 AAAAkey root@demo-alice"),
            ),
            Endpoint::new(
                "bob",
                "demo-bob",
                "=cmd()",
                "127.0.0.1",
                20002,
                Some("pw".into()),
                None,
            ),
        ];
        let csv = to_csv(&rows);
        let mut lines = csv.lines();
        assert_eq!(
            lines.next(),
            Some("username,instance,node,host,port,ssh_command,password,known_hosts")
        );
        assert_eq!(
            lines.next(),
            Some(
                "alice,demo-alice,n1,127.0.0.1,20001,ssh -p 20001 alice@127.0.0.1,,\
                 [127.0.0.1]:20001 ssh-ed25519 AAAAkey root@demo-alice"
            )
        );
        assert_eq!(
            lines.next(),
            Some("bob,demo-bob,'=cmd(),127.0.0.1,20002,ssh -p 20002 bob@127.0.0.1,pw,")
        );
        assert_eq!(
            to_known_hosts(&rows),
            "[127.0.0.1]:20001 ssh-ed25519 AAAAkey root@demo-alice\n",
            "only the containers made so far"
        );
    }

    #[test]
    fn ssh_config_and_json_carry_every_endpoint() {
        let rows = [Endpoint::new(
            "alice",
            "demo-alice",
            "n1",
            "lab.example",
            20001,
            None,
            None,
        )];
        assert_eq!(
            to_ssh_config(&rows),
            "Host demo-alice\n    HostName lab.example\n    Port 20001\n    User alice\n"
        );
        let json: serde_json::Value = serde_json::from_str(&to_json(&rows)).expect("json");
        assert_eq!(json[0]["port"], 20001);
        assert!(json[0].get("password").is_none());
        assert!(json[0].get("known_hosts").is_none());
        let standard = Endpoint::new("bob", "b", "n1", "lab.example", 22, None, Some("k"));
        assert_eq!(standard.known_hosts.as_deref(), Some("lab.example k"));
    }
}
