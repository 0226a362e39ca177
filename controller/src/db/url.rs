//! The database URL as the pool hands it to libpq: without TLS when PostgreSQL is on this host.

use std::borrow::Cow;
use std::net::IpAddr;

use percent_encoding::percent_decode_str;

/// What libpq would take from the environment for a URL that leaves it out (`PGSSLMODE`,
/// `PGHOST`, `PGHOSTADDR`), passed in so the rule can be tested.
#[derive(Debug, Default)]
pub struct LibpqEnv {
    pub sslmode: Option<String>,
    pub host: Option<String>,
    pub hostaddr: Option<String>,
}

impl LibpqEnv {
    pub fn from_process() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        LibpqEnv {
            sslmode: var("PGSSLMODE"),
            host: var("PGHOST"),
            hostaddr: var("PGHOSTADDR"),
        }
    }
}

/// `url` with `sslmode=disable` added when every host it reaches is loopback (127.0.0.0/8, ::1,
/// `localhost`) or a Unix socket and neither it nor `PGSSLMODE` names an sslmode. libpq's default,
/// `prefer`, negotiates TLS whenever the server offers it: on loopback that protects nothing and
/// costs a handshake per connection and encryption of every query and row. Any other URL, and any
/// URL that is not a `postgres://` or `postgresql://` URI, is returned as it is.
pub fn without_loopback_tls<'a>(url: &'a str, env: &LibpqEnv) -> Cow<'a, str> {
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return Cow::Borrowed(url);
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = before_query.split('/').next().unwrap_or("");
    let hostspec = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let mut hosts: Vec<String> = hostspec.split(',').map(without_port).collect();
    let mut hostaddrs = Vec::new();
    for (key, value) in query.split('&').filter_map(|p| p.split_once('=')) {
        match key {
            "sslmode" => return Cow::Borrowed(url),
            // Judged with the authority's hosts, whichever of them libpq ends up using.
            "host" => hosts.extend(value.split(',').map(decode)),
            "hostaddr" => hostaddrs.extend(value.split(',').map(decode)),
            _ => {}
        }
    }
    if env.sslmode.is_some() {
        return Cow::Borrowed(url);
    }
    hosts.retain(|h| !h.is_empty());
    if hosts.is_empty() {
        if let Some(host) = &env.host {
            hosts = host.split(',').map(str::to_string).collect();
        }
    }
    if hostaddrs.is_empty() {
        if let Some(addr) = &env.hostaddr {
            hostaddrs = addr.split(',').map(str::to_string).collect();
        }
    }
    // No host at all is libpq's default Unix socket.
    let local = hosts.iter().all(|h| is_local(h)) && hostaddrs.iter().all(|h| is_local(h));
    if !local {
        return Cow::Borrowed(url);
    }
    let separator = if query.is_empty() {
        if url.ends_with('?') {
            ""
        } else {
            "?"
        }
    } else {
        "&"
    };
    Cow::Owned(format!("{url}{separator}sslmode=disable"))
}

/// `url` with each of `params` added that it does not name itself (an operator's own setting in
/// the URL wins): to a `postgres://` URI as query parameters, to a `key=value` connection string
/// as more pairs.
pub fn with_connection_params(url: &str, params: &[(&str, String)]) -> String {
    let uri = url.starts_with("postgres://") || url.starts_with("postgresql://");
    let named: Vec<&str> = if uri {
        url.split_once('?')
            .map_or("", |(_, q)| q)
            .split('&')
            .filter_map(|p| p.split_once('=').map(|(k, _)| k))
            .collect()
    } else {
        url.split_whitespace()
            .filter_map(|p| p.split_once('=').map(|(k, _)| k.trim()))
            .collect()
    };
    let mut out = url.to_string();
    for (key, value) in params.iter().filter(|(k, _)| !named.contains(k)) {
        if uri {
            let separator = match out.split_once('?') {
                None => "?",
                Some((_, "")) => "",
                Some(_) => "&",
            };
            out.push_str(&format!("{separator}{key}={value}"));
        } else {
            out.push_str(&format!(" {key}={value}"));
        }
    }
    out
}

/// One host of a URI's host list, port removed and percent-decoded (`[::1]:5432` is `::1`,
/// `%2Frun%2Fpostgresql` a socket directory).
fn without_port(hostport: &str) -> String {
    let host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => hostport.split(':').next().unwrap_or(""),
    };
    decode(host)
}

fn decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// A Unix socket directory or a loopback name or address.
fn is_local(host: &str) -> bool {
    host.starts_with('/')
        || host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewritten(url: &str) -> String {
        without_loopback_tls(url, &LibpqEnv::default()).into_owned()
    }

    #[test]
    fn loopback_and_sockets_go_without_tls() {
        for url in [
            "postgres://cohort:cohort@127.0.0.1:5432/cohort",
            "postgresql://cohort@localhost/cohort",
            "postgres://127.0.0.2/cohort",
            "postgres://[::1]:5432/cohort",
            "postgres://cohort@%2Frun%2Fpostgresql/cohort",
            "postgres:///cohort",
            "postgres://localhost:5432,127.0.0.1:5433/cohort",
        ] {
            assert_eq!(rewritten(url), format!("{url}?sslmode=disable"), "{url}");
        }
        assert_eq!(
            rewritten("postgres://u@/cohort?host=/var/run/postgresql&application_name=c"),
            "postgres://u@/cohort?host=/var/run/postgresql&application_name=c&sslmode=disable"
        );
    }

    #[test]
    fn remote_hosts_and_named_sslmodes_are_left_alone() {
        for url in [
            "postgres://cohort@db.example.org/cohort",
            "postgres://cohort@10.0.0.5:5432/cohort",
            "postgres://[2001:db8::1]/cohort",
            "postgres://localhost,db.example.org/cohort",
            "postgres://localhost/cohort?hostaddr=10.0.0.5",
            "postgres://127.0.0.1/cohort?sslmode=require",
            "postgres:///cohort?host=db.example.org",
            "host=127.0.0.1 dbname=cohort",
        ] {
            assert_eq!(rewritten(url), url, "{url}");
        }
    }

    #[test]
    fn connection_params_are_added_unless_named() {
        let params = [
            ("keepalives", "1".to_string()),
            ("connect_timeout", "10".to_string()),
        ];
        assert_eq!(
            with_connection_params("postgres://h/db", &params),
            "postgres://h/db?keepalives=1&connect_timeout=10"
        );
        assert_eq!(
            with_connection_params("postgres://h/db?sslmode=disable&connect_timeout=3", &params),
            "postgres://h/db?sslmode=disable&connect_timeout=3&keepalives=1"
        );
        assert_eq!(
            with_connection_params("host=h dbname=db keepalives=0", &params),
            "host=h dbname=db keepalives=0 connect_timeout=10"
        );
    }

    #[test]
    fn the_environment_counts_as_the_url_would() {
        let url = "postgres:///cohort";
        let remote = LibpqEnv {
            host: Some("db.example.org".into()),
            ..LibpqEnv::default()
        };
        assert_eq!(without_loopback_tls(url, &remote), url);
        let required = LibpqEnv {
            sslmode: Some("require".into()),
            ..LibpqEnv::default()
        };
        assert_eq!(
            without_loopback_tls("postgres://127.0.0.1/cohort", &required),
            "postgres://127.0.0.1/cohort"
        );
        let local = LibpqEnv {
            host: Some("/run/postgresql".into()),
            ..LibpqEnv::default()
        };
        assert_eq!(
            without_loopback_tls(url, &local),
            "postgres:///cohort?sslmode=disable"
        );
    }
}
